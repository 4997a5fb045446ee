"""One run: its plan (files, the lake's snapshot, settings), the store of its frames, and
what happens to it: `prepare`, each stage computed and checked (`stages.py`), `publish`
(what it writes planned by `writes.py`).

Only `publish` writes lake tables, all at once and journalled; every stage before it
reads the lake at the table versions `prepare` recorded (Delta time travel), so a run
is computed against one snapshot and publishing refuses a lake that another run moved
meanwhile (maintenance, which changes no row, may have run between).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from pyspark.sql import DataFrame, SparkSession

from correlake import progress
from correlake.caches import history_keys
from correlake.config import TABLES, default_max_quarantine_ratio, run_path, table_path
from correlake.errors import CorrelakeError
from correlake.lake import as_of as lake_as_of
from correlake.lake import discovery, journal, live, meta, tables
from correlake.lake.discovery import Found, find
from correlake.lake.journal import journalled, rollback
from correlake.lake.preflight import require_one_kind
from correlake.lake.restate import merge_earliest
from correlake.quality import gates
from correlake.run import backends, writes
from correlake.run.backends import Backend, Scope, TooLargeForDriver
from correlake.run.maintenance import only_maintained
from correlake.run.outbox import due_on_refresh
from correlake.run.outbox import migrate as migrate_outbox
from correlake.run.result import RunResult, new_run_id
from correlake.run.store import Plan, staged_run
from correlake.run.writes import SCHEMAS, How, Write
from correlake.runtime.codegen import row_projections
from correlake.runtime.threads import run_concurrently
from correlake.semantics.quiet import SINCE_COLUMNS
from correlake.transforms.scope import HistoryKeys


class LakeMoved(CorrelakeError):
    """Another run published since this run was prepared (a retry would meet the same lake)."""


@dataclass(frozen=True)
class Stage:
    """A step of a run (`stages.STAGES`): computed, then checked by its gate."""

    name: str  # also its Airflow task's id (its gate's: gate_<name>)
    compute: Callable[[StagedRun], None]  # puts the stage's frames in the run's store
    gate: Callable[[StagedRun], dict[str, DataFrame]]  # the frames its suites validate (or GateFailed)


class StagedRun:
    """One run's stages. Construct with `prepare` (new run) or `load` (staged on disk)."""

    def __init__(self, spark: SparkSession, lake_dir: str, plan: Plan, store):
        self.spark, self.lake_dir, self.plan, self.store = spark, lake_dir, plan, store
        self.history_after: HistoryKeys | None = None  # silver's key columns as its publish leaves them (silver stage)

    @property
    def run_id(self) -> str:
        return self.plan.run_id

    @property
    def result(self) -> RunResult:
        return self.plan.result

    @classmethod
    def prepare(cls, spark: SparkSession, landing: str | None, lake_dir: str, store_for: Callable,
                as_of: int | None = None, max_quarantine_ratio: float | None = None, rebuild: bool = False,
                dry_run: bool = False, path: str | None = None, full_listing: bool = False) -> StagedRun | RunResult:
        """Plan a run over the landing's new files (or, to rebuild, over bronze alone), its
        frames in `store_for(run_id)`, on `path` (config.RUN_PATHS; None: CORRELAKE_RUN_PATH),
        its backend chosen here (`backends.choose`).
        With nothing new, a `nothing_new` result is returned, after re-evaluating the statuses
        if `as_of` moved (a dry run only says it would). `full_listing`: the whole landing listed
        (discovery.py). The caller holds the lake's lock."""
        rolled_back = rollback(lake_dir)
        found = Found([], False) if rebuild else find(landing, lake_dir, full_listing)
        require_one_kind(lake_dir, {f.stream for f in found.files})  # before anything is written
        run_id = new_run_id()
        migrated = not dry_run and lake_as_of.migrate(spark, lake_dir, f"{run_id}-migration")
        outbox_migrated = None if dry_run else migrate_outbox(spark, lake_dir, f"{run_id}-outbox-migration")
        last = meta.last_event_time(lake_dir)
        files = found.files
        if not files and not rebuild:
            result = _refresh_only(spark, lake_dir, last, as_of, dry_run)
            result.rolled_back, result.migrated, result.outbox_migrated = rolled_back, migrated, outbox_migrated
            return result
        ratio = default_max_quarantine_ratio() if max_quarantine_ratio is None else max_quarantine_ratio
        plan = Plan(run_id, files, {name: tables.version(table_path(lake_dir, name)) for name in TABLES}, ratio,
                    last, RunResult(run_id, files=len(files), as_of=as_of, rebuild=rebuild, rolled_back=rolled_back,
                                    migrated=migrated, outbox_migrated=outbox_migrated, max_quarantine_ratio=ratio),
                    meta.records_read(lake_dir), path or run_path(), found.full, found.held)
        plan.backend = backends.choose(plan)
        staged = cls(spark, lake_dir, plan, store_for(run_id))
        staged.store.save_plan(plan)
        return staged

    @classmethod
    def load(cls, spark: SparkSession, lake_dir: str, run_id: str) -> StagedRun:
        store = staged_run(lake_dir, run_id)
        return cls(spark, lake_dir, store.load_plan(), store)

    def frame(self, name: str) -> DataFrame:
        """A frame an earlier stage of this run put in the store."""
        return self.store.get(self.spark, name)

    @property
    def backend(self) -> Backend:
        """Where the run's work is executed, as its plan names it."""
        return backends.for_run(self)

    def history(self, name: str) -> DataFrame | None:
        """A lake table as of the run's snapshot; None if it did not exist."""
        version = self.plan.versions[name]
        if version < 0:
            return None
        return self.spark.read.format("delta").option("versionAsOf", version).load(table_path(self.lake_dir, name))

    def ingested_files(self) -> list[tuple]:
        """The run's rows of `_meta/ingested_files` (times in epoch millis): the files it read."""
        result = self.result
        return [(f.stream, f.path, f.size, f.modified_at, result.lines.get(f.path, 0), result.ingested_at, self.run_id)
                for f in self.plan.files if f.path not in result.not_read]

    @cached_property
    def as_of_before(self) -> int | None:
        """gold/as_of's instant in the run's snapshot of the lake (None: the lake has none yet)."""
        return lake_as_of.current(self.lake_dir, self.plan.versions["as_of"])

    def _timed(self, label: str, work: Callable[[], None]) -> None:
        start = time.perf_counter()
        try:
            with row_projections(self.spark, interpreted=self.plan.interpreted):
                work()
        finally:
            self.result.timings[label] = round(time.perf_counter() - start, 2)
            self.store.save_plan(self.plan)
        step = f"gate {label.removeprefix('gate:')} passed" if label.startswith("gate:") else f"{label} done"
        progress.step(f"run: {step} in {self.result.timings[label]:.1f} s")

    def compute(self, stage: Stage) -> None:
        """Compute the stage: its frames put in the run's store."""
        self._timed(stage.name, lambda: stage.compute(self))

    def scope(self, new_messages: DataFrame, new_events: DataFrame, deployments: DataFrame, redeployed: bool) -> Scope:
        """The scope the run's backend plans (`Backend.plan_scope`); planned again on Spark if
        the driver backend finds the run too large for it, what the stage computed before kept
        (the plan, saved, says Spark from then on)."""
        try:
            return self.backend.plan_scope(new_messages, new_events, deployments, redeployed)
        except TooLargeForDriver as large:
            progress.step(f"run: the scope on Spark ({large})")
            self.plan.backend = backends.SPARK
            self.store.save_plan(self.plan)
            return self.backend.plan_scope(new_messages, new_events, deployments, redeployed)

    def check(self, stage: Stage) -> None:
        """Pass the stage's gate or raise GateFailed (nothing is written either way)."""
        self._timed(f"gate:{stage.name}", lambda: gates.check(stage.name, stage.gate(self), self.lake_dir))

    def publish(self) -> RunResult:
        """Write every table of the run, all or nothing. The caller holds the lake's lock."""
        moved = {name: v for name, v in self.plan.versions.items()
                 if tables.version(path := table_path(self.lake_dir, name)) != v
                 and not only_maintained(self.spark, path, v)}
        if moved:
            raise LakeMoved(f"the lake changed since run {self.run_id} was prepared (tables {sorted(moved)}); "
                            "this run was not published: start a new one")
        with journalled(self.spark, self.lake_dir, self.run_id):
            self._timed("write", self._write)
        if not self.result.rebuild:  # after the commit: a run that did not publish leaves the marks
            discovery.record_published(self.lake_dir, self.plan.files, set(self.result.not_read),
                                       self.plan.full_listing, self.plan.held)
        self.discard()
        return self.result

    def _write_plan(self) -> writes.WritePlan:
        """What the run writes, from what it found and the lake as it is."""
        versions, result = self.plan.versions, self.result
        if result.rebuild:
            return writes.plan_writes(versions, rebuild=True, outbox_events=result.outbox_events,
                                      engine_correlations=result.engine_correlations, mapped=result.mapped is not None)
        before = self.as_of_before
        key_groups_changed = versions["key_groups"] < 0 or not self.frame("key_groups").isEmpty()
        return writes.plan_writes(versions, deployments=result.deployments, key_groups_changed=key_groups_changed,
                                  as_of_moved=result.as_of != before, as_of_before=before,
                                  outbox_events=result.outbox_events, appended_rows=result.appended_rows(),
                                  engine_input=self.plan.engine_input,
                                  engine_correlations=result.engine_correlations, mapped=result.mapped is not None)

    def _write(self) -> None:
        """Carry out the write plan on a few threads, the longest first (the caller journals it)."""
        plan = self._write_plan()
        backend = self.backend
        restating = any(w.how in (How.MERGE, How.REFRESH) for w in plan.writes)  # a first run, a rebuild: none
        touched = backend.touched() if restating else None
        run_concurrently([lambda w=w: self._write_table(w, backend, touched) for w in plan.writes])
        meta.record_run(self.lake_dir, self.result.runs_row())

    def _write_table(self, write: Write, backend: Backend, touched) -> None:
        spark, lake, name, run_id = self.spark, self.lake_dir, write.table, self.run_id
        if write.how is How.RECORD:
            return (lake_as_of.record(lake, self.result.as_of, run_id) if name == "as_of"
                    else meta.record_ingested(lake, self.ingested_files(), run_id))
        if write.how is How.APPEND:
            return backend.append(self.frame(name), name)
        if write.how is How.OVERWRITE:  # a gold table's live rows in files apart (lake/live.py), as in CREATE
            return tables.overwrite(live.apart(self.frame(name), name, self.result.as_of), lake, name, run_id)
        rows = self.frame(name).select(*SCHEMAS[name].fieldNames())  # the table's columns
        if write.how is How.EARLIEST:
            return merge_earliest(spark, lake, name, rows)
        if write.how is How.CREATE:
            tables.create(live.apart(rows, name, self.result.as_of), lake, name, run_id)
        else:  # key groups: the groups that changed; the other tables: the keys the run touched
            before, after, also = write.as_of_before, self.result.as_of, None
            if write.how is How.REFRESH:  # the other keys' rows whose status crosses, in the same MERGE (one rewrite)
                others = lake_as_of.crossed(spark.read.format("delta").load(table_path(lake, name)), before, after)
                rows = backend.refreshed(rows, others, touched, SINCE_COLUMNS[name])
                also = lake_as_of.may_cross(before, after)
            backend.restate(name, rows, None if name == "key_groups" else touched, list(write.keys), also)

    def discard(self) -> None:
        self.store.clear()


def _refresh_only(spark, lake_dir, last_event_time, as_of, dry_run) -> RunResult:
    """Nothing new: statuses move only if as_of does (an explicit --as-of, or back to the
    default), and with a delivery delay the outbox gets the events that fell due. A
    refresh is a run of no files, recorded in `_meta/runs`; a dry run changes nothing."""
    target, before = lake_as_of.moves(lake_dir, as_of, last_event_time)
    result = RunResult(None, nothing_new=True, as_of=target)
    if before is None:
        return result
    result.as_of_before = before
    if not dry_run:
        result.run_id, published = new_run_id(), journal.published(lake_dir)
        with journalled(spark, lake_dir, result.run_id):
            events = due_on_refresh(spark, lake_dir, result.run_id, target, before)
            result.statuses_changed = lake_as_of.refresh(spark, lake_dir, before, target)
            lake_as_of.record(lake_dir, target, result.run_id)
            result.outbox_events = 0 if events is None else events.count()
            if result.outbox_events:
                tables.append(events, lake_dir, "outbox", result.run_id)
            meta.record_run(lake_dir, result.runs_row())
        history_keys.carry(lake_dir, published, result.run_id)
    return result
