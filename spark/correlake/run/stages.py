"""A run as stages: prepare → bronze → check → silver → check → gold → check → publish.

Only `publish` writes lake tables, all at once and journalled; every stage before it
reads the lake at the table versions `prepare` recorded (Delta time travel), so a run
is computed against one snapshot and publishing refuses a lake that another run moved
meanwhile (maintenance, which changes no row, may have run between).
The CLI runs the stages in one process with frames kept in memory, Airflow each as a
task with frames staged on disk (`store.py`); both call the same `StagedRun` methods.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import uuid

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.transforms import bronze, gold, scope, silver
from correlake.quality import gates
from correlake.lake import tables as lake
from correlake.lake.journal import journalled, rollback
from correlake.lake.lock import run_lock
from correlake.config import (AIRFLOW_LOCK_WAIT_SECONDS, GOLD_TABLES, STAGED_RUN_MAX_AGE_SECONDS, STREAMS, TABLES,
                     default_max_quarantine_ratio, table_path)
from correlake.quality.gates import GateFailed
from correlake.lake.landing import new_files
from correlake.transforms.gold import messages_at
from correlake.lake.maintenance import only_maintained
from correlake.lake.restate import restate
from correlake.contract.reasons import reason_kind
from correlake.run.result import RunResult
from correlake.contract.schemas import (GOLD, GOLD_KEYS, INGESTED_FILE, INGESTED_FILES, KEY_GROUPS, RUNS, SCOPE, as_timestamps, struct,
                      with_millis)
from correlake.session import row_projections, run_concurrently
from correlake.run.store import DiskStore, Plan, staged_runs_dir


class LakeMoved(RuntimeError):
    """Another run published since this run was prepared."""


class StagedRun:
    """One run's stages. Construct with `prepare` (new run) or `load` (staged on disk)."""

    def __init__(self, spark: SparkSession, lake_dir: str, plan: Plan, store):
        self.spark, self.lake_dir, self.plan, self.store = spark, lake_dir, plan, store

    @property
    def run_id(self) -> str:
        return self.plan.run_id

    @property
    def result(self) -> RunResult:
        return self.plan.result

    def _frame(self, name: str) -> DataFrame:
        """A frame an earlier stage of this run put in the store."""
        return self.store.get(self.spark, name)

    # -- prepare ----------------------------------------------------------------------
    @classmethod
    def prepare(cls, spark: SparkSession, landing: str | None, lake_dir: str, store_for, as_of: int | None = None,
                max_quarantine_ratio: float | None = None, rebuild: bool = False,
                dry_run: bool = False) -> StagedRun | RunResult:
        """Plan a run over the landing's new files (or, to rebuild, over bronze alone).

        With nothing new, a `nothing_new` result is returned, after re-evaluating the
        statuses if `as_of` moved (a dry run only says it would).
        The caller holds the lake's lock.
        """
        rolled_back = rollback(spark, lake_dir)
        last = _last_run(spark, lake_dir)
        files = [] if rebuild else new_files(landing, _ingested(spark, lake_dir))
        if not files and not rebuild:
            result = _refresh_only(spark, lake_dir, last, as_of, dry_run)
            result.rolled_back = rolled_back
            return result
        run_id = _new_run_id()
        ratio = default_max_quarantine_ratio() if max_quarantine_ratio is None else max_quarantine_ratio
        plan = Plan(run_id, files, {name: lake.version(table_path(lake_dir, name)) for name in TABLES}, ratio,
                    last, RunResult(run_id, files=len(files), as_of=as_of, rebuild=rebuild, rolled_back=rolled_back))
        staged = cls(spark, lake_dir, plan, store_for(run_id))
        staged.store.save_plan(plan)
        return staged

    @classmethod
    def load(cls, spark: SparkSession, lake_dir: str, run_id: str) -> StagedRun:
        store = DiskStore(staged_runs_dir(lake_dir) / run_id)
        return cls(spark, lake_dir, store.load_plan(), store)

    def _history(self, name: str) -> DataFrame | None:
        """A lake table as of the run's snapshot; None if it did not exist."""
        version = self.plan.versions[name]
        if version < 0:
            return None
        return self.spark.read.format("delta").option("versionAsOf", version).load(table_path(self.lake_dir, name))

    def _timed(self, stage: str, work) -> None:
        start = time.perf_counter()
        try:
            with row_projections(self.spark, interpreted=self.plan.small):
                work()
        finally:
            self.result.timings[stage] = round(time.perf_counter() - start, 2)
            self.store.save_plan(self.plan)

    # -- bronze -----------------------------------------------------------------------
    def bronze(self) -> None:
        self._timed("bronze", self._bronze)

    def _bronze(self) -> None:
        spark, result = self.spark, self.result
        # one ingestion time, however often the frames below are computed
        meta = {"_ingested_at": F.timestamp_millis(F.lit(int(time.time() * 1000))), "_run_id": F.lit(self.run_id)}
        history = {s: b for s in STREAMS if (b := self._history(f"bronze_{s}")) is not None}
        parsed = bronze.parse_landing(spark, self.plan.files)
        known = spark.createDataFrame([], bronze.KNOWN)
        if history:
            parsed = parsed.localCheckpoint()  # its position ranges narrow the read of bronze
            known = _known_positions(known, history, parsed)
        classified = bronze.classify(parsed, known).localCheckpoint()
        _bronze_stats(classified, result, self.plan.last_event_time)
        for s in STREAMS:
            self.store.put(f"bronze_{s}", bronze.bronze_records(classified, s).withColumns(meta), narrow=True)
        self.store.put("quarantine", bronze.quarantine_records(classified).withColumns(meta), narrow=True)
        self.store.put("ingested_files", spark.createDataFrame(
            [(f.stream, f.path, f.size, f.modified_at, result.lines.get(f.path, 0)) for f in self.plan.files],
            struct(*INGESTED_FILE)).withColumns(meta))

    # -- gates --------------------------------------------------------------------------
    def check(self, gate: str) -> None:
        """Pass the gate or raise GateFailed (nothing is written either way)."""
        self._timed(f"gate:{gate}", lambda: self._check(gate))

    def _check(self, gate: str) -> None:
        get = self._frame
        if gate == "bronze":
            self._check_quarantine_ratio()
            frames = gates.bronze_frames(*(silver.distinct_records(get(f"bronze_{s}")) for s in STREAMS))
        elif gate == "silver":
            frames = gates.silver_frames(get("silver_messages"))
        else:
            frames = gates.gold_frames({name: get(name) for name in GOLD_TABLES})
        gates.check(gate, frames, self.lake_dir)

    def _check_quarantine_ratio(self) -> None:
        result, limit = self.result, self.plan.max_quarantine_ratio
        ratio = result.quarantined_total / max(result.records_read, 1)
        if ratio > limit:
            reasons = "\n".join(f"  {count:>8}  {reason}  (first: {where})"
                                 for reason, count, where in result.top_quarantine_reasons(20))
            enough = math.ceil(ratio * 10_000) / 10_000
            raise GateFailed("max_quarantine_ratio",
                             f"quarantined {result.quarantined_total} of {result.records_read} records "
                             f"({ratio:.2%}) > max_quarantine_ratio {limit:.2%}; nothing was committed\n{reasons}\n"
                             f"To keep these lines in quarantine and go on, run once with a max_quarantine_ratio "
                             f"of {enough} (--max-quarantine-ratio, or the DAG's param); the files stay unread "
                             "until then")

    # -- silver -------------------------------------------------------------------------
    def silver(self) -> None:
        self._timed("silver", self._silver)

    def _silver(self) -> None:
        get = self._frame
        rebuild = self.result.rebuild
        old = (lambda name: None) if rebuild else self._history  # noqa: E731
        new = {s: silver.distinct_records(get(f"bronze_{s}")) for s in STREAMS}
        if rebuild:  # every record of bronze is new to silver
            new = {s: silver.distinct_records(self._history(f"bronze_{s}")).unionByName(new[s]) for s in STREAMS}
        new_events = silver.workflow_events(new["workflow_events"])
        old_deployments = old("silver_deployments")
        deployments = self.store.put("silver_deployments", silver.deployments(
            silver.deployed(new_events).unionByName(old_deployments.drop("is_current"))
            if old_deployments is not None else silver.deployed(new_events)))
        old_messages = old("silver_messages")
        work = scope.recompute(new["messages"], new_events,
                               None if old_messages is None else scope.message_records(old_messages),
                               old("silver_workflow_events"), old("key_groups"), deployments,
                               redeployed=self.result.deployments > 0)
        self.store.put("key_groups", work.group_changes)
        self.store.put("scope", work.scope)
        self.store.put("silver_messages", work.messages)
        self.store.put("routed", work.routed)
        self.store.put("silver_workflow_events", new_events, narrow=not rebuild)
        self.result.touched_groups = work.scope.select("tenant_id", "label").distinct().count()

    # -- gold ---------------------------------------------------------------------------
    def gold(self) -> None:
        self._timed("gold", self._gold)

    def _gold(self) -> None:
        get = self._frame
        scope = get("scope")
        labelled = get("silver_messages").join(scope.select(*SCOPE, "label"), SCOPE)
        engine_in = gold.engine_input(labelled, get("routed"))
        engine_out = gold.run_engine(engine_in, gold.deployments_by_tenant(get("silver_deployments"))).localCheckpoint()
        as_of = self.result.as_of
        tables = gold.gold_tables(engine_out, get("silver_messages"), as_of)
        for name in GOLD_TABLES:
            self.store.put(name, tables[name])
        self.result.correlations = get("correlations").count()

    # -- publish ------------------------------------------------------------------------
    def publish(self) -> RunResult:
        """Write every table of the run, all or nothing. The caller holds the lake's lock."""
        moved = {name: v for name, v in self.plan.versions.items()
                 if lake.version(path := table_path(self.lake_dir, name)) != v
                 and not only_maintained(self.spark, path, v)}
        if moved:
            raise LakeMoved(f"the lake changed since run {self.run_id} was prepared (tables {sorted(moved)}); "
                            "this run was not published: start a new one")
        with journalled(self.spark, self.lake_dir, self.run_id):
            self._timed("write", self._write)
        self.discard()
        return self.result

    def _write(self) -> None:
        spark, result = self.spark, self.result
        writes = self._rebuild_writes() if result.rebuild else self._incremental_writes()
        run_concurrently(writes)
        lake.append(_run_row(spark, result), self.lake_dir, "runs", self.run_id)

    def _rebuild_writes(self) -> list:
        """Every silver and gold table replaced."""
        return [lambda n=name: lake.overwrite(self._frame(n), self.lake_dir, n, self.run_id)
                for name in ("silver_messages", "silver_workflow_events", "silver_deployments", "key_groups",
                             *GOLD_TABLES)]

    def _incremental_writes(self) -> list:
        """The touched groups' rows restated, the run's new records appended."""
        get, lake_dir, run_id = self._frame, self.lake_dir, self.run_id
        scope = get("scope").select(*SCOPE)
        # the MERGEs first: they take longest
        writes = [lambda n=name: self._restate(n, GOLD[n], scope, GOLD_KEYS[n]) for name in GOLD_TABLES
                  if name != "messages"]
        writes.append(lambda: self._write_messages(scope))
        writes.append(lambda: self._restate("silver_messages", silver.SILVER_MESSAGE, scope, ["message_key"]))
        changes = get("key_groups")
        if self.plan.versions["key_groups"] < 0 or not changes.isEmpty():
            writes.append(lambda: self._restate("key_groups", KEY_GROUPS, changes.select(*SCOPE), SCOPE))
        if self.result.deployments or self.plan.versions["silver_deployments"] < 0:  # a lake has every table
            writes.append(lambda: lake.overwrite(get("silver_deployments"), lake_dir, "silver_deployments", run_id))
        writes += [lambda n=name: lake.append(get(n), lake_dir, n, run_id)
                   for name in ("quarantine", "ingested_files", "silver_workflow_events")]
        writes += [lambda s=s: lake.append(get(f"bronze_{s}"), lake_dir, f"bronze_{s}", run_id) for s in STREAMS]
        return writes

    def _write_messages(self, scope: DataFrame) -> None:
        """gold/messages: the scope's rows restated; every row rewritten if `as_of` moved."""
        as_of = self.result.as_of
        if self.plan.versions["messages"] >= 0 and as_of is not None:  # the table is read only when it can move
            current = lake.read(self.spark, self.lake_dir, "messages", GOLD["messages"])
            if as_of != _current_as_of(current):
                rows = self._rows("messages", GOLD["messages"])
                lake.overwrite(messages_at(current, as_of, rows, scope), self.lake_dir, "messages", self.run_id)
                return
        self._restate("messages", GOLD["messages"], scope, GOLD_KEYS["messages"])

    def _restate(self, name: str, schema, scope: DataFrame, keys: list[str]) -> None:
        """Restate the scope's rows of a table with a MERGE; a new table is simply created."""
        rows = self._rows(name, schema)
        if self.plan.versions[name] < 0:
            lake.create(rows, self.lake_dir, name, self.run_id)
        else:
            restate(self.spark, table_path(self.lake_dir, name), rows, scope, keys)

    def _rows(self, name: str, schema) -> DataFrame:
        """The run's frame of table `name`, in the table's columns."""
        return self._frame(name).select(*schema.fieldNames())

    def discard(self) -> None:
        self.store.clear()


# -- Airflow's entry points: one stage per call, frames staged on disk ----------------
def prepare(spark: SparkSession, landing: str | None, lake_dir: str, as_of: int | None = None,
            max_quarantine_ratio: float | None = None, rebuild: bool = False, dry_run: bool = False,
            wait_seconds: float = AIRFLOW_LOCK_WAIT_SECONDS) -> str | RunResult:
    """Plan a staged run; its id, or the `nothing_new` result when there is nothing new."""
    _forget_old_staged_runs(lake_dir)
    with run_lock(lake_dir, wait_seconds):
        staged = StagedRun.prepare(spark, landing, lake_dir,
                                   lambda run_id: DiskStore(staged_runs_dir(lake_dir) / run_id), as_of=as_of,
                                   max_quarantine_ratio=max_quarantine_ratio, rebuild=rebuild, dry_run=dry_run)
    return staged.run_id if isinstance(staged, StagedRun) else staged


def stage(spark: SparkSession, lake_dir: str, run_id: str, name: str) -> None:
    """Run stage `name` (bronze, silver or gold) of a staged run."""
    getattr(StagedRun.load(spark, lake_dir, run_id), name)()


def check(spark: SparkSession, lake_dir: str, run_id: str, gate: str) -> None:
    StagedRun.load(spark, lake_dir, run_id).check(gate)


def publish(spark: SparkSession, lake_dir: str, run_id: str,
            wait_seconds: float = AIRFLOW_LOCK_WAIT_SECONDS) -> RunResult:
    with run_lock(lake_dir, wait_seconds):
        rolled_back = rollback(spark, lake_dir)  # an earlier try of this publish, killed
        result = StagedRun.load(spark, lake_dir, run_id).publish()
    result.rolled_back = rolled_back or result.rolled_back  # else the one `prepare` rolled back
    return result


def is_staged(lake_dir: str, run_id: str) -> bool:
    return DiskStore(staged_runs_dir(lake_dir) / run_id).has_plan()


def discard(lake_dir: str, run_id: str) -> None:
    DiskStore(staged_runs_dir(lake_dir) / run_id).clear()


def _forget_old_staged_runs(lake_dir: str) -> None:
    root = staged_runs_dir(lake_dir)
    if root.is_dir():
        for staged in root.iterdir():
            try:
                age = time.time() - staged.stat().st_mtime
            except FileNotFoundError:  # discarded meanwhile by another run
                continue
            if age > STAGED_RUN_MAX_AGE_SECONDS:
                shutil.rmtree(staged, ignore_errors=True)


# -- helpers ----------------------------------------------------------------------------
def _ingested(spark: SparkSession, lake_dir: str) -> set[tuple]:
    files = lake.read(spark, lake_dir, "ingested_files", INGESTED_FILES)
    return {(r["path"], r["size"], r["modified_at"]) for r in files.select("path", "size", "modified_at").collect()}


def _last_run(spark: SparkSession, lake_dir: str) -> int | None:
    """The max event time seen by the lake's runs so far (epoch millis)."""
    runs = lake.read(spark, lake_dir, "runs", RUNS)
    return runs.agg(F.max(F.unix_millis("max_event_time"))).first()[0]


def _new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def _refresh_only(spark, lake_dir, last_event_time, as_of, dry_run) -> RunResult:
    """Nothing new: statuses move only if as_of does (an explicit --as-of, or back to the
    default). A refresh is a run of no files, recorded in `_meta/runs`; a dry run changes nothing."""
    target = as_of if as_of is not None else last_event_time
    result = RunResult(None, nothing_new=True, as_of=target)
    if target is None or not lake.is_table(table_path(lake_dir, "messages")):
        return result
    messages = lake.read(spark, lake_dir, "messages", GOLD["messages"])
    current = _current_as_of(messages)
    if current is None or target == current:
        return result
    result.as_of_before = current
    if not dry_run:
        result.run_id = _new_run_id()
        with journalled(spark, lake_dir, result.run_id):
            lake.overwrite(messages_at(messages, target), lake_dir, "messages", result.run_id)
            lake.append(_run_row(spark, result), lake_dir, "runs", result.run_id)
    return result


def _current_as_of(messages: DataFrame) -> int | None:
    """The `as_of` of gold/messages (epoch millis; every row has the same), None if it has no rows."""
    return messages.agg(F.max(F.unix_millis("as_of"))).first()[0]


def _bronze_stats(classified: DataFrame, result: RunResult, last_event_time: int | None) -> None:
    """Counts of the run's lines (one pass), the max event time and hence as_of."""
    rows = (classified.groupBy("stream", "reason", "_is_replay", "type", "_source_file")
            .agg(F.count("*").alias("n"), F.max(F.coalesce("published_at", "timestamp")).alias("t"),
                 F.min("_line").alias("first_line")).collect())
    first: dict[str, tuple[str, int]] = {}
    for r in rows:
        result.records_read += r["n"]
        result.lines[r["_source_file"]] = result.lines.get(r["_source_file"], 0) + r["n"]
        if r["reason"] is not None:
            kind = reason_kind(r["reason"])
            result.quarantined[kind] = result.quarantined.get(kind, 0) + r["n"]
            first[kind] = min(first.get(kind, (r["_source_file"], r["first_line"])), (r["_source_file"], r["first_line"]))
        elif r["_is_replay"]:
            result.replays += r["n"]
        elif r["stream"] == "messages":
            result.new_messages += r["n"]
        else:
            result.new_workflow_events += r["n"]
            result.deployments += r["n"] if r["type"] == "PROCESS_DEPLOYED" else 0
    result.first_quarantined = {reason: f"{path}:{line}" if line else path  # 0: the whole file
                                for reason, (path, line) in first.items()}
    times = [r["t"] for r in rows if r["reason"] is None and not r["_is_replay"] and r["t"] is not None]
    if last_event_time is not None:
        times.append(last_event_time)
    result.max_event_time = max(times, default=None)
    result.as_of = result.as_of if result.as_of is not None else result.max_event_time


def _known_positions(known: DataFrame, history: dict, parsed: DataFrame) -> DataFrame:
    """`known` plus the records (`bronze.KNOWN`) that bronze (`history`: stream -> table)
    already holds at the positions `parsed` has; bronze is read within each stream's range
    of new positions only, so Delta skips the files outside it (positions grow with time)."""
    ranges = {r["stream"]: (r["lo"], r["hi"]) for r in parsed.groupBy("stream").agg(
        F.min("position").alias("lo"), F.max("position").alias("hi")).collect() if r["lo"] is not None}
    for stream, b in history.items():
        if stream in ranges:
            known = known.unionByName(b.where(~F.col("_is_replay") & F.col("position").between(*ranges[stream]))
                                      .select(F.lit(stream).alias("stream"), "position", "_record_hash",
                                              "_source_file", "_line"))
    return known


def _run_row(spark, result: RunResult) -> DataFrame:
    """The run's row of `_meta/runs`."""
    summary = json.dumps({"quarantined": result.quarantined, "timings": result.timings,
                          "touched_groups": result.touched_groups, "replays": result.replays,
                          "rebuild": result.rebuild, "as_of_before": result.as_of_before})
    row = (result.run_id, result.started_at, int(time.time() * 1000), result.files, result.records_read,
           result.quarantined_total, result.max_event_time, result.as_of, summary)
    return as_timestamps(spark.createDataFrame([row], with_millis(RUNS)), RUNS)
