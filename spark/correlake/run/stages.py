"""The stages of a run, in order, as a table: each computes frames from the run's
snapshot of the lake and the frames of the stages before it, and is followed by its
gate, which validates frames of it. Nothing is written to the lake here (`publish`:
`staged.py`, `writes.py`)."""

from __future__ import annotations

import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.config import BRONZE_TABLES, ENGINE_STREAM, GOLD_TABLES, STAGE_NAMES, STREAMS
from correlake.contract.schemas import SCOPE
from correlake.quality import rules
from correlake.quality.gates import GateFailed
from correlake.run import engine_silver
from correlake.run.outbox import new_events
from correlake.run.staged import Stage, StagedRun
from correlake.transforms import bronze, engine_audit, gold, silver


def _bronze(run: StagedRun) -> None:
    """The new landing lines parsed, classified (replays, conflicts) and counted."""
    spark, result = run.spark, run.result
    # one ingestion time, however often the frames below are computed (and the files' rows: `_meta/ingested_files`)
    result.ingested_at = int(time.time() * 1000)
    meta = {"_ingested_at": F.timestamp_millis(F.lit(result.ingested_at)), "_run_id": F.lit(run.run_id)}
    history = {s: b for s, name in BRONZE_TABLES.items() if (b := run.history(name)) is not None}
    # parsed once: its position ranges narrow the read of bronze, its identities tell whether any repeats
    parsed = bronze.parse_landing(spark, run.plan.files).localCheckpoint()
    known = bronze.known_records(parsed, history) if history else spark.createDataFrame([], bronze.KNOWN)
    repeated = bronze.repeated_identities(parsed, known).localCheckpoint()  # a job of its own, read twice if any
    classified = bronze.classify(parsed, known, repeated).localCheckpoint()
    result.count_lines(bronze.line_counts(classified), run.plan.last_event_time)
    for s, name in BRONZE_TABLES.items():
        run.store.put(name, bronze.bronze_records(classified, s).withColumns(meta), checkpoint=False)
    run.store.put("quarantine", bronze.quarantine_records(classified).withColumns(meta), checkpoint=False)


def _bronze_gate(run: StagedRun) -> dict[str, DataFrame]:
    if excess := run.result.quarantine_excess(run.plan.max_quarantine_ratio):
        raise GateFailed("max_quarantine_ratio", excess)
    return rules.bronze_frames(*(silver.distinct_records(run.frame(f"bronze_{s}")) for s in STREAMS))


def _silver(run: StagedRun) -> None:
    """Distinct records, deployments, and the key groups the new records touch, with their
    records, planned by the run's backend."""
    rebuild = run.result.rebuild
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
            silver.deployed(new_events), None if rebuild else run.history("silver_deployments")))
    scope = run.scope(new["messages"], new_events, deployments, run.result.deployments > 0)
    backend = run.backend  # as the scope was planned
    run.store.put("key_groups", scope.key_group_changes, checkpoint=False)  # checkpointed or local, as the scope
    run.store.put("touched_keys", scope.touched_keys, checkpoint=False)
    messages = run.store.put("silver_messages", backend.accepted_messages(scope.message_records))
    if scope.history_after is not None:
        run.history_after = scope.history_after(messages)
    run.store.put("routed", scope.routed)
    run.result.path, run.result.touched_groups = backend.name, scope.touched_groups
    run.store.put("silver_workflow_events", appended, checkpoint=rebuild)


def _silver_gate(run: StagedRun) -> dict[str, DataFrame]:
    return rules.silver_frames(run.frame("silver_messages"))


def _gold(run: StagedRun) -> None:
    """The touched key groups replayed by the engine: their rows of the gold tables."""
    touched = run.frame("touched_keys")
    labelled = run.frame("silver_messages").join(touched.select(*SCOPE, "label"), SCOPE)
    engine_in = gold.engine_input(labelled, run.frame("routed"), ends_last=engine_silver.is_engine_lake(run))
    deployments = gold.deployments_by_tenant(run.frame("silver_deployments"))
    engine_out = run.backend.run_engine(engine_in, deployments)
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
    """The outbox events that make the outbox agree with gold after this run: of the touched keys'
    correlations, the run's and gold's of messages before their key group's replay point."""
    touched, correlations, gold = run.frame("touched_keys"), run.frame("correlations"), run.history("correlations")
    replayed = touched.where(F.col("since").isNotNull()).select(*SCOPE, "since")
    if gold is not None and not replayed.isEmpty():
        correlations = correlations.unionByName(gold.join(replayed, SCOPE).where(
            F.col("message_published_at") < F.col("since")).select(*correlations.columns))
    events, run.result.outbox_backfilled = new_events(
        run, run.backend, run.run_id, run.result.as_of, lambda: run.as_of_before, correlations,
        touched.select(*SCOPE), run.result.rebuild)
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
