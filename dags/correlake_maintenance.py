"""correlake, daily: `correlake maintain` on the hourly DAG's lake (compaction, deletion
vectors purged, VACUUM, a log checkpoint per table; the gates' old validations removed).

At half past three, between two hourly runs. Maintenance takes the lake's lock, so it
waits for a run in progress; it changes no row, so an hourly run staged before it still
publishes after it. Its conf takes `retain_hours` (168 h or more) and `dry_run`, nothing
else. Thin, as the hourly DAG's file: nothing of Spark is imported here.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import CronTriggerTimetable, Param, dag

from correlake.config import AIRFLOW_TASK_TIMEOUT_SECONDS, DELTA_RETAIN_HOURS
from correlake.interfaces.airflow_dags import DAG_SETTINGS, maintain


@dag(
    dag_id="correlake_maintenance",
    description="Compact, vacuum and checkpoint every table of correlake's lake",
    schedule=CronTriggerTimetable("30 3 * * *", timezone="UTC"),
    **DAG_SETTINGS,
    default_args={"retries": 3, "retry_delay": timedelta(minutes=10),
                  "execution_timeout": timedelta(seconds=AIRFLOW_TASK_TIMEOUT_SECONDS)},
    params={
        # under 168 h fails the task (not refused here: the task names an unknown key of the same conf first)
        "retain_hours": Param(None, type=["null", "number"], minimum=0,
                              description=f"VACUUM retention in hours. Empty: Delta's {DELTA_RETAIN_HOURS} h. "
                                          "Less fails the run (`correlake maintain --force` only)."),
        "dry_run": Param(False, type="boolean", description="Change nothing; report what VACUUM would delete."),
    },
    doc_md=__doc__,
)
def correlake_maintenance():
    maintain()


correlake_maintenance()
