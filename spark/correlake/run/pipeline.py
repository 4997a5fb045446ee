"""One run in one process: every stage of `stages.STAGES` in a row, frames kept in memory.

A run holds the lake's lock from start to end, is journalled (an unfinished run is
rolled back by the next one), recomputes only the key groups its new records touch,
and with nothing new writes nothing. The process keeps silver's key columns for the
lake's next run (`history_keys.py`).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from correlake.lake.lock import run_lock
from correlake.quality import gates
from correlake.run import history_keys
from correlake.run.result import RunResult
from correlake.run.staged import StagedRun
from correlake.run.stages import STAGES
from correlake.run.store import MemoryStore
from correlake.session import release

__all__ = ["RunResult", "run"]


def run(spark: SparkSession, landing: str | None, lake_dir: str, as_of: int | None = None,
        max_quarantine_ratio: float | None = None, wait_seconds: float = 0.0, rebuild: bool = False,
        dry_run: bool = False) -> RunResult:
    """Ingest what is new in `landing` (or, to rebuild, recompute silver and gold from
    bronze) and bring silver and gold up to date; with `dry_run`, stop after the gates."""
    with run_lock(lake_dir, wait_seconds):
        staged = StagedRun.prepare(spark, landing, lake_dir, lambda _: MemoryStore(), as_of=as_of,
                                   max_quarantine_ratio=max_quarantine_ratio, rebuild=rebuild, dry_run=dry_run)
        if isinstance(staged, RunResult):
            return staged
        gates.import_ahead()  # a fresh process's first gate need not wait for it
        published = None
        try:
            try:
                for stage in STAGES:
                    staged.compute(stage)
                    staged.check(stage)
                if dry_run:
                    return staged.result
                published = staged.publish()
                history_keys.keep(lake_dir, published.run_id, staged.history_after)
                return published
            finally:
                staged.discard()
                spark.catalog.clearCache()
                release(spark)
        except KeyboardInterrupt as stopped:  # Ctrl-C or SIGTERM, which may come after the publish
            stopped.published = published  # read by `errors.published_before`
            raise
