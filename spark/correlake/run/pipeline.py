"""One run in one process: every stage of `stages.STAGES` in a row, frames kept in memory.

A run holds the lake's lock from start to end, is journalled (an unfinished run is
rolled back by the next one), recomputes only the key groups its new records touch,
and with nothing new writes nothing. Unless the run is a large one, each stage's gate is
checked on a thread of its own while the next stage computes; every gate has passed
before anything is written. The process caches silver's key columns for the lake's next
run (`caches/history_keys.py`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from pyspark.sql import SparkSession

from correlake.caches import history_keys
from correlake.lake import table_cache
from correlake.lake.lock import run_lock
from correlake.quality import gx
from correlake.quality.gates import GateFailed
from correlake.run.result import RunResult
from correlake.run.staged import StagedRun
from correlake.run.stages import STAGES
from correlake.run.store import MemoryStore
from correlake.runtime.codegen import row_projections
from correlake.runtime.memory import release

__all__ = ["RunResult", "run"]


def run(spark: SparkSession, landing: str | None, lake_dir: str, as_of: int | None = None,
        max_quarantine_ratio: float | None = None, wait_seconds: float = 0.0, rebuild: bool = False,
        dry_run: bool = False, path: str | None = None, full_listing: bool = False) -> RunResult:
    """Ingest what is new in `landing` (or, to rebuild, recompute silver and gold from
    bronze) and bring silver and gold up to date; with `dry_run`, stop after the gates.
    `path` forces the driver backend (`driver`) or Spark (`spark`); None: CORRELAKE_RUN_PATH.
    `full_listing`: the whole landing listed, not only what follows the last ingested paths."""
    with run_lock(lake_dir, wait_seconds):
        staged = StagedRun.prepare(spark, landing, lake_dir, lambda _: MemoryStore(), as_of=as_of,
                                   max_quarantine_ratio=max_quarantine_ratio, rebuild=rebuild, dry_run=dry_run,
                                   path=path, full_listing=full_listing)
        if isinstance(staged, RunResult):
            return staged
        gx.import_ahead()  # a fresh process's first gate need not wait for it
        published = None
        try:
            try:
                _stages_and_gates(staged)
                if dry_run:
                    return staged.result
                published = staged.publish()
                history_keys.store(lake_dir, published.run_id, staged.history_after)
                return published
            finally:
                staged.discard()
                table_cache.drop_stale(lake_dir)  # what analyst commands cached of the tables it changed
                release(spark)
        except KeyboardInterrupt as stopped:  # Ctrl-C or SIGTERM, which may come after the publish
            stopped.published = published  # read by `errors.published_before`
            raise


def _stages_and_gates(staged: StagedRun) -> None:
    """Compute every stage in order, each gate checked (in stage order, on one thread)
    while the next stage computes, if the run is not a large one (`Plan.gates_beside`): a
    gate reads only frames of its stage and those before, and its Great Expectations work
    is Python's while Spark computes. Returns once every gate has passed. A failed gate
    stops the run at the next stage, and is what is raised if a stage fails while it is
    pending (the stage may have failed on what it rejects)."""
    with row_projections(staged.spark, interpreted=staged.plan.interpreted), ThreadPoolExecutor(1) as checker:
        checks: list[Future] = []
        try:
            for stage in STAGES:
                _raise_failed_gate([c for c in checks if c.done()])
                staged.compute(stage)
                checks.append(checker.submit(staged.check, stage))
                if not staged.plan.gates_beside:  # a large run's stages and gates have the cores in turn
                    checks[-1].result()
        except Exception:
            _raise_failed_gate(checks)
            raise
        except BaseException:  # an interrupt: the gates not begun are not checked
            for check in checks:
                check.cancel()
            raise
        for check in checks:
            check.result()
    timings = staged.result.timings  # in stage order, as if one after another
    order = [label for stage in STAGES for label in (stage.name, f"gate:{stage.name}")]
    staged.result.timings = {label: timings[label] for label in sorted(timings, key=order.index)}


def _raise_failed_gate(checks: list[Future]) -> None:
    """Raise the first of these gates' failures, if one failed (waits for them)."""
    if failed := next((e for c in checks if isinstance(e := c.exception(), GateFailed)), None):
        raise failed from None
