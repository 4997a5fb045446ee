"""correlake, hourly: prepare → bronze → gate → silver → gate → gold → gate → publish → stats.

Thin on purpose: nothing of Spark or Great Expectations is imported when the scheduler
parses this file. Each task (`correlake.interfaces.airflow_dags`) runs one function of
`correlake.interfaces.airflow_tasks`, imported when the task runs, which calls a step of
`correlake.run.stepwise`: the same stages as the CLI's runs.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import CronDataIntervalTimetable, Param, chain, dag

from correlake.config import (
    AIRFLOW_RUN_TIMEOUT_SECONDS,
    AIRFLOW_TASK_TIMEOUT_SECONDS,
    MAX_QUARANTINE_RATIO,
    STAGE_NAMES,
)
from correlake.contract.parsing import ISO_WITH_OFFSET
from correlake.interfaces import airflow_dags as tasks
from correlake.interfaces.airflow_dags import DAG_SETTINGS, GOLD_ASSETS


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
        "full_listing": Param(False, type="boolean",
                              description="List the whole landing (finds files written out of lexical order); "
                                          "done every 24 h anyway."),
    },
    doc_md=__doc__,
)
def correlake_hourly():
    steps = [tasks.prepare()]
    for stage in STAGE_NAMES:
        steps.append(tasks.stage.override(task_id=stage)(stage))
        steps.append(tasks.gate.override(task_id=f"gate_{stage}", retries=0)(stage))  # bad data stays bad
    steps += [tasks.publish.override(outlets=list(GOLD_ASSETS.values()))(), tasks.stats()]
    chain(*steps)


correlake_hourly()
