"""correlake, hourly: prepare → bronze → gate → silver → gate → gold → gate → publish → stats.

Thin on purpose: nothing of Spark or Great Expectations is imported when the scheduler
parses this file. Each task runs one function of `correlake.interfaces.airflow_tasks`, imported
when the task runs, which calls the same `correlake.run.stages` as the CLI.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Asset, CronDataIntervalTimetable, Param, chain, dag, task
from correlake.config import (AIRFLOW_RUN_TIMEOUT_SECONDS, AIRFLOW_TASK_TIMEOUT_SECONDS, GOLD_TABLES,
                              MAX_QUARANTINE_RATIO, STAGES)
from correlake.interfaces.airflow_dags import DAG_SETTINGS, call_task
from correlake.contract.parsing import ISO_WITH_OFFSET

GOLD_ASSETS = [Asset(name=f"correlake/gold/{table}", group="correlake") for table in GOLD_TABLES]

step = task(call_task)


@dag(
    dag_id="correlake_hourly",
    description="Correlate messages with workflow subscriptions: landing → bronze → silver → gold",
    schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
    **DAG_SETTINGS,
    dagrun_timeout=timedelta(seconds=AIRFLOW_RUN_TIMEOUT_SECONDS),
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30), "retry_exponential_backoff": 2.0,
                  "max_retry_delay": timedelta(minutes=10),
                  "execution_timeout": timedelta(seconds=AIRFLOW_TASK_TIMEOUT_SECONDS)},
    params={
        "as_of": Param(None, type=["null", "string"], pattern=f"^{ISO_WITH_OFFSET}$",
                       description="Evaluate statuses at this time, ISO-8601 with an offset. Empty: a scheduled "
                                   "run's data interval end; a manual run's latest event time."),
        "rebuild": Param(False, type="boolean", description="Full rebuild of silver and gold from bronze."),
        "max_quarantine_ratio": Param(None, type=["null", "number"], minimum=0, maximum=1,
                                      description="Fail the bronze gate above this share of quarantined "
                                                  "records. Empty: $CORRELAKE_MAX_QUARANTINE_RATIO, "
                                                  f"else {MAX_QUARANTINE_RATIO}."),
        "dry_run": Param(False, type="boolean",
                         description="Run every stage and gate, publish nothing."),
    },
    doc_md=__doc__,
)
def correlake_hourly():
    tasks = [task.short_circuit(call_task).override(task_id="prepare")("prepare")]
    for stage in STAGES:
        tasks.append(step.override(task_id=stage)("stage", stage))
        tasks.append(step.override(task_id=f"gate_{stage}", retries=0)("gate", stage))
    tasks.append(step.override(task_id="publish", outlets=GOLD_ASSETS)("publish"))
    tasks.append(step.override(task_id="stats")("stats"))
    chain(*tasks)


correlake_hourly()
