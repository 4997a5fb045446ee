"""The tasks of the DAG files (`dags/`) and their common settings. Light: each task's body
is a function of `correlake.interfaces.airflow_tasks`, which needs Spark, imported when the
task runs, never when the scheduler parses a DAG file."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from airflow.sdk import Asset, get_current_context, task

from correlake.config import GOLD_TABLES

# every correlake DAG: no catchup of missed intervals, one run at a time
DAG_SETTINGS = {"start_date": datetime(2026, 1, 1, tzinfo=timezone.utc), "catchup": False, "max_active_runs": 1,
                "tags": ["correlake"]}
# what the hourly DAG's `publish` updates, and the delivery DAG is scheduled on
GOLD_ASSETS = {table: Asset(name=f"correlake/gold/{table}", group="correlake") for table in GOLD_TABLES}


def _body(name: str, *args):
    """Call the function `name` of `airflow_tasks`, imported in the running task, on the
    task's context, its output's control characters escaped (`correlake.text`). With
    Airflow's INFO logging, py4j would log every closed connection, GX every function it
    registers."""
    for noisy in ("py4j", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from correlake.interfaces import airflow_tasks
    from correlake.text import escaped_output

    with escaped_output():
        return getattr(airflow_tasks, name)(get_current_context(), *args)


@task.short_circuit(task_id="prepare")
def prepare() -> dict | None:
    """Plan the run; None (the later tasks skip) when nothing is new."""
    return _body("prepare")


@task
def stage(name: str) -> None:
    """Compute stage `name` of the run `prepare` planned."""
    _body("stage", name)


@task
def gate(name: str) -> None:
    """Pass the gate of stage `name`, or fail for good."""
    _body("gate", name)


@task(task_id="publish", multiple_outputs=False)  # one XCom: the RunResult as a dict
def publish() -> dict:
    """Commit the run to the lake."""
    return _body("publish")


@task(task_id="stats", multiple_outputs=False)  # one XCom: the counts by reason
def stats() -> dict[str, int]:
    """The run's summary, what gold holds, and the counts of what did not correlate, by reason."""
    return _body("stats")


@task(task_id="maintain")
def maintain() -> None:
    """Maintain the lake."""
    _body("maintain")


@task(task_id="deliver")
def deliver() -> None:
    """One delivery pass to the sink of the Airflow Connections."""
    _body("deliver")
