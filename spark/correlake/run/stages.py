"""The stages of a run, in order, as a table: each computes frames from the run's
snapshot of the lake and the frames of the stages before it, and is followed by its
gate, which validates frames of it. Nothing is written to the lake here (`publish`:
`staged.py`, `writes.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from correlake.caches import history_keys
from correlake.config import BRONZE_TABLES, ENGINE_STREAM, GOLD_TABLES, STAGE_NAMES, STREAMS
from correlake.contract.schemas import KEY_GROUPS, MESSAGE_FIELDS, SCOPE
from correlake.quality import rules
from correlake.quality.gates import GateFailed
from correlake.run import engine_silver, small_scope
from correlake.run.outbox import new_events, of_keys
from correlake.run.staged import Stage, StagedRun
from correlake.transforms import bronze, engine_audit, gold, silver
from correlake.transforms import scope as key_scope


def _bronze(run: StagedRun) -> None:
    """The new landing lines parsed, classified (replays, conflicts) and counted."""
    spark, result = run.spark, run.result
    # one ingestion time, however often the frames below are computed (and the files' rows: `_meta/ingested_files`)
    result.ingested_at = int(time.time() * 1000)
    meta = {"_ingested_at": F.timestamp_millis(F.lit(result.ingested_at)), "_run_id": F.lit(run.run_id)}
    history = {s: b for s, name in BRONZE_TABLES.items() if (b := run.history(name)) is not None}
    parsed = bronze.parse_landing(spark, run.plan.files)
    if history:
        parsed = parsed.localCheckpoint()  # its position ranges narrow the read of bronze
        known = bronze.known_records(parsed, history)
    else:
        known = spark.createDataFrame([], bronze.KNOWN)
    classified = bronze.classify(parsed, known).localCheckpoint()
    result.count_lines(bronze.line_counts(classified), run.plan.last_event_time)
    for s, name in BRONZE_TABLES.items():
        run.store.put(name, bronze.bronze_records(classified, s).withColumns(meta), narrow=True)
    run.store.put("quarantine", bronze.quarantine_records(classified).withColumns(meta), narrow=True)


def _bronze_gate(run: StagedRun) -> dict[str, DataFrame]:
    if excess := run.result.quarantine_excess(run.plan.max_quarantine_ratio):
        raise GateFailed("max_quarantine_ratio", excess)
    return rules.bronze_frames(*(silver.distinct_records(run.frame(f"bronze_{s}")) for s in STREAMS))


def _silver(run: StagedRun) -> None:
    """Distinct records, deployments, and the key groups the new records touch, with their
    records: planned on the driver for a small run (`small_scope`), else on Spark."""
    rebuild = run.result.rebuild
    old = (lambda name: None) if rebuild else run.history  # noqa: E731
    if engine_silver.is_engine_lake(run):  # exporter records mapped: the run's new records
        mapped = engine_silver.mapped(run)
        new, new_events, appended = {"messages": mapped.messages}, mapped.events, mapped.appended
        deployments = run.store.put("silver_deployments", mapped.deployments)
    else:
        new = {s: silver.distinct_records(run.frame(f"bronze_{s}")) for s in STREAMS}
        if rebuild:  # every record of bronze is new to silver
            new = {s: silver.distinct_records(run.history(f"bronze_{s}")).unionByName(new[s]) for s in STREAMS}
        new_events = appended = silver.workflow_events(new["workflow_events"])
        deployments = run.store.put("silver_deployments", silver.deployments(
            silver.deployed(new_events), old("silver_deployments")))
    history = not rebuild and run.plan.versions["silver_messages"] >= 0  # silver's tables are read
    redeployed = run.result.deployments > 0
    small = small_scope.plan(run, new["messages"], new_events, history, redeployed)
    if small is not None:
        _silver_on_driver(run, small, new["messages"], new_events)
    else:
        work = spark_plan(run, new["messages"], new_events, old, deployments, redeployed)
        run.store.put("key_groups", work.key_group_changes, narrow=True)  # checkpointed by `recompute`, as the scope
        run.store.put("touched_keys", work.scope, narrow=True)
        run.result.path = "spark"
        run.history_after = work.history_after(run.store.put("silver_messages",
                                                             silver.accepted_messages(work.message_records)))
        run.store.put("routed", work.routed)
        run.result.touched_groups = work.scope.select("tenant_id", "label").distinct().count()
    run.store.put("silver_workflow_events", appended, narrow=not rebuild)


def spark_plan(run: StagedRun, new_messages: DataFrame, new_events: DataFrame, old: Callable, deployments: DataFrame,
               redeployed: bool) -> key_scope.Recompute:
    """Spark's plan of the run's silver (`old`: silver's tables in the run's snapshot, None for a rebuild)."""
    old_messages = old("silver_messages")
    old_messages = None if old_messages is None else key_scope.message_records(old_messages)
    old_events = old("silver_workflow_events")
    return key_scope.recompute(new_messages, new_events, old_messages, old_events,
                               _history_keys(run, old_messages, old_events, old("key_groups")), deployments, redeployed)


def _silver_on_driver(run: StagedRun, small: small_scope.SmallPlan, new_messages: DataFrame,
                      new_events: DataFrame) -> None:
    """A small run's silver frames from its plan: rule 7 in this process, no Spark join."""
    spark, run.result.path = run.spark, "small"
    run.store.put("key_groups", spark.createDataFrame(small.key_group_changes, KEY_GROUPS), narrow=True)
    run.store.put("touched_keys", spark.createDataFrame(small.scope, KEY_GROUPS), narrow=True)
    records = spark.createDataFrame(small.message_records, new_messages.select(*MESSAGE_FIELDS).schema)
    run.store.put("silver_messages", silver.accepted_messages(records, on_driver=True))
    routed = StructType([*new_events.schema.fields, StructField("label", StringType())])
    run.store.put("routed", spark.createDataFrame(small.routed_events, routed))
    run.result.touched_groups = small.touched_groups


def _history_keys(run: StagedRun, old_messages, old_events, old_key_groups) -> key_scope.HistoryKeys | None:
    """Silver's key columns in the run's snapshot: as this process kept them, or from the lake."""
    if old_messages is None and old_events is None:  # a first run, a rebuild
        return None
    if (kept := history_keys.cached(run.lake_dir, run.plan.versions)) is not None:
        return kept
    return key_scope.HistoryKeys.read(old_messages, old_events, old_key_groups)


def _silver_gate(run: StagedRun) -> dict[str, DataFrame]:
    return rules.silver_frames(run.frame("silver_messages"))


def _gold(run: StagedRun) -> None:
    """The touched key groups replayed by the engine: their rows of the gold tables."""
    touched = run.frame("touched_keys")
    labelled = run.frame("silver_messages").join(touched.select(*SCOPE, "label"), SCOPE)
    engine_in = gold.engine_input(labelled, run.frame("routed"), ends_last=engine_silver.is_engine_lake(run))
    deployments = gold.deployments_by_tenant(run.frame("silver_deployments"))
    if run.result.path == "small":  # as silver chose
        engine_out = gold.run_engine_in_driver(engine_in, deployments)
    else:
        engine_out = gold.run_engine(engine_in, deployments).localCheckpoint()
    tables = gold.gold_tables(engine_out, run.frame("silver_messages"), run.result.as_of)
    for name in GOLD_TABLES:
        run.store.put(name, tables[name])
    run.result.correlations = run.frame("correlations").count()
    _outbox(run)
    _engine_correlations(run)


def _engine_correlations(run: StagedRun) -> None:
    """The rows the run's exporter records give gold/engine_correlations (a rebuild's: all of
    bronze's), with those of earlier runs that its pairings rename, from what silver found
    (`engine_silver.mapped`); a canonical run has none."""
    result = run.result
    if not (result.accepted.get(ENGINE_STREAM) or (result.rebuild and run.history("bronze_engine_records") is not None)):
        return
    found = run.frame("engine_correlated")
    rows, fresh = engine_audit.run_rows(found, run.frame("engine_start_pairs"), run.frame("engine_run_start_pairs"),
                                        None if result.rebuild else run.history("engine_correlations"))
    result.engine_correlations = run.store.put("engine_correlations", rows).count()
    result.engine_duplicates = found.count() - fresh.count()


def _outbox(run: StagedRun) -> None:
    """The outbox events that make the outbox agree with gold after this run (a small run
    looks its touched keys' events up by key)."""
    def keyed() -> DataFrame | None:  # asked for only where it can stand for the outbox's join
        return of_keys(run.spark, run.lake_dir, run.plan.versions["outbox"], run.touched_set())

    events, run.result.outbox_backfilled = new_events(
        run.spark, run.history, run.run_id, run.result.as_of, lambda: run.as_of_before, run.frame("correlations"),
        run.frame("touched_keys").select(*SCOPE), run.result.rebuild, keyed if run.result.path == "small" else None)
    run.result.outbox_events = run.store.put("outbox", events).count()


def _gold_gate(run: StagedRun) -> dict[str, DataFrame]:
    return rules.gold_frames({name: run.frame(name) for name in GOLD_TABLES})


STAGES = tuple(Stage(name, compute, gate) for name, (compute, gate) in zip(
    STAGE_NAMES, ((_bronze, _bronze_gate), (_silver, _silver_gate), (_gold, _gold_gate)), strict=True))


def stage_named(name: str) -> Stage:
    """The stage of this name (as the DAG's tasks and the driver's callers give it)."""
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise ValueError(f"no stage {name!r}: the stages are {', '.join(STAGE_NAMES)}")
