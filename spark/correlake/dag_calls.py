"""What the DAG files' tasks call. Light: `correlake.airflow_tasks`, which needs Spark,
is imported only when a task runs, never when the scheduler parses a DAG file."""

from __future__ import annotations


def call_task(function: str, *args):
    """Run `correlake.airflow_tasks.<function>(context, *args)` in the running task."""
    from airflow.sdk import get_current_context

    from . import airflow_tasks

    return getattr(airflow_tasks, function)(get_current_context(), *args)
