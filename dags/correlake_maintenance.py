"""correlake, daily: `correlake maintain` on the hourly DAG's lake (compaction, deletion
vectors purged, VACUUM, a log checkpoint per table; the gates' old validations removed).

At half past three, between two hourly runs. Maintenance takes the lake's lock, so it
waits for a run in progress; it changes no row, so an hourly run staged before it still
publishes after it. Thin, as the hourly DAG's file: nothing of Spark is imported here.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import CronTriggerTimetable, Param, dag
from correlake.config import AIRFLOW_TASK_TIMEOUT_SECONDS
from correlake.interfaces.airflow_dags import DAG_SETTINGS, maintain


@dag(
    dag_id="correlake_maintenance",
    description="Compact, vacuum and checkpoint every table of correlake's lake",
    schedule=CronTriggerTimetable("30 3 * * *", timezone="UTC"),
    **DAG_SETTINGS,
    default_args={"retries": 3, "retry_delay": timedelta(minutes=10),
                  "execution_timeout": timedelta(seconds=AIRFLOW_TASK_TIMEOUT_SECONDS)},
    params={
        "retain_hours": Param(None, type=["null", "number"], minimum=0,
                              description="VACUUM retention in hours. Empty: Delta's 168 h. A smaller value "
                                          "overrides Delta's retention check: older versions become unreadable."),
        "dry_run": Param(False, type="boolean", description="Change nothing; report what VACUUM would delete."),
    },
    doc_md=__doc__,
)
def correlake_maintenance():
    maintain()


correlake_maintenance()
