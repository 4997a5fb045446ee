"""A run one step per call, its frames staged on disk between calls (`store.DiskStore`):
what the Airflow tasks call, on the driver or in their own process. Each step is its
own process's work; `prepare` and `publish` hold the lake's lock, the stages between
read the snapshot `prepare` recorded."""

from __future__ import annotations

from pyspark.sql import SparkSession

from correlake.config import AIRFLOW_LOCK_WAIT_SECONDS
from correlake.lake.journal import rollback
from correlake.lake.lock import run_lock
from correlake.run.result import RunResult
from correlake.run.staged import StagedRun
from correlake.run.stages import stage_named
from correlake.run.store import forget_old_staged_runs, staged_run


def prepare(spark: SparkSession, landing: str | None, lake_dir: str, as_of: int | None = None,
            max_quarantine_ratio: float | None = None, rebuild: bool = False, dry_run: bool = False,
            wait_seconds: float = AIRFLOW_LOCK_WAIT_SECONDS, full_listing: bool = False) -> str | RunResult:
    """Plan a staged run; its id, or the `nothing_new` result when there is nothing new."""
    forget_old_staged_runs(lake_dir)
    with run_lock(lake_dir, wait_seconds):
        staged = StagedRun.prepare(spark, landing, lake_dir, lambda run_id: staged_run(lake_dir, run_id),
                                   as_of=as_of, max_quarantine_ratio=max_quarantine_ratio, rebuild=rebuild,
                                   dry_run=dry_run, full_listing=full_listing)
    return staged.run_id if isinstance(staged, StagedRun) else staged


def compute(spark: SparkSession, lake_dir: str, run_id: str, stage: str) -> None:
    """Compute stage `stage` (bronze, silver or gold) of a staged run."""
    StagedRun.load(spark, lake_dir, run_id).compute(stage_named(stage))


def check(spark: SparkSession, lake_dir: str, run_id: str, stage: str) -> None:
    """Pass the gate of stage `stage` of a staged run, or raise GateFailed."""
    StagedRun.load(spark, lake_dir, run_id).check(stage_named(stage))


def publish(spark: SparkSession, lake_dir: str, run_id: str,
            wait_seconds: float = AIRFLOW_LOCK_WAIT_SECONDS) -> RunResult:
    with run_lock(lake_dir, wait_seconds):
        rolled_back = rollback(lake_dir)  # an earlier try of this publish, killed
        result = StagedRun.load(spark, lake_dir, run_id).publish()
    result.rolled_back = rolled_back or result.rolled_back  # else the one `prepare` rolled back
    return result
