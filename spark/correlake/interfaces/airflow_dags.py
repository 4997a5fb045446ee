"""What the DAG files share: their common settings, and the call of a task's body. Light:
`correlake.interfaces.airflow_tasks`, which needs Spark, is imported only when a task runs, never
when the scheduler parses a DAG file."""

from __future__ import annotations

from datetime import datetime, timezone

# every correlake DAG: no catchup of missed intervals, one run at a time
DAG_SETTINGS = {"start_date": datetime(2026, 1, 1, tzinfo=timezone.utc), "catchup": False, "max_active_runs": 1,
                "tags": ["correlake"]}


def call_task(function: str, *args):
    """Run `correlake.interfaces.airflow_tasks.<function>(context, *args)` in the running task."""
    from airflow.sdk import get_current_context

    from correlake.interfaces import airflow_tasks

    return getattr(airflow_tasks, function)(get_current_context(), *args)
