"""One run: landing -> bronze -> silver -> gold, with the gates between them.

A run holds the lake's lock, is journalled (an unfinished run is rolled back by the
next one), recomputes only the key groups its new records touch, and with nothing
new writes nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import bronze, gates, gold, lake, routing, silver
from .config import GOLD_TABLES, MAX_QUARANTINE_RATIO, STREAMS, table_path
from .gates import GateFailed
from .landing import new_files
from .merge import SCOPE, refresh_statuses, restate
from .schemas import GOLD, GOLD_KEYS, INGESTED_FILES, L, S, T, struct

RUNS = struct(("run_id", S), ("started_at", T), ("finished_at", T), ("files", L), ("records_read", L),
              ("quarantined", L), ("max_event_time", T), ("as_of", T), ("summary", S))


@dataclass
class RunResult:
    run_id: str | None
    files: int = 0
    records_read: int = 0
    quarantined: dict = field(default_factory=dict)
    replays: int = 0
    new_messages: int = 0
    new_workflow_events: int = 0
    touched_groups: int = 0
    correlations: int = 0
    as_of: int | None = None
    max_event_time: int | None = None
    deployments: int = 0
    lines: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    noop: bool = False
    started_at: int = field(default_factory=lambda: int(time.time() * 1000))  # epoch millis

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())


@contextmanager
def _timed(result: RunResult, stage: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        result.timings[stage] = round(time.perf_counter() - start, 2)


def _ingested(spark: SparkSession, lake_dir: str) -> set[tuple]:
    files = lake.read(spark, lake_dir, "ingested_files", INGESTED_FILES)
    return {(r["path"], r["size"], r["modified_at"]) for r in files.select("path", "size", "modified_at").collect()}


def _last_run(spark: SparkSession, lake_dir: str):
    runs = lake.read(spark, lake_dir, "runs", RUNS)
    return runs.orderBy(F.desc("finished_at")).select(F.unix_millis("max_event_time").alias("max_event_time")).first()


def run(spark: SparkSession, landing: str, lake_dir: str, as_of: int | None = None,
        max_quarantine_ratio: float = MAX_QUARANTINE_RATIO, wait_seconds: float = 0.0) -> RunResult:
    """Ingest what is new in `landing` and bring silver and gold up to date."""
    with lake.run_lock(lake_dir, wait_seconds):
        lake.rollback(spark, lake_dir)
        files = new_files(landing, _ingested(spark, lake_dir))
        last = _last_run(spark, lake_dir)
        if not files:
            return _refresh_only(spark, lake_dir, last, as_of)
        run_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"
        result = RunResult(run_id, files=len(files), as_of=as_of)
        lake.begin(lake_dir, run_id)
        spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", run_id)
        try:
            _run(spark, lake_dir, files, last, as_of, max_quarantine_ratio, result)
        except BaseException:
            lake.rollback(spark, lake_dir)
            raise
        finally:
            spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
            spark.catalog.clearCache()
        lake.commit(lake_dir)
        return result


def _refresh_only(spark, lake_dir, last, as_of) -> RunResult:
    """Nothing new: statuses move only if as_of does (an explicit --as-of, or back to the default)."""
    result = RunResult(None, noop=True)
    if last is None:
        return result
    result.as_of = as_of if as_of is not None else last["max_event_time"]
    messages = table_path(lake_dir, "messages")
    current = spark.read.format("delta").load(messages).agg(F.max(F.unix_millis("as_of"))).first()[0]
    if result.as_of is not None and current is not None and result.as_of != current:
        refresh_statuses(spark, messages, result.as_of)
    return result


def _run(spark, lake_dir, files, last, as_of, max_ratio, result: RunResult) -> None:
    """Compute every stage and pass every gate first; then write all tables at once."""
    run_id = result.run_id
    meta = {"_ingested_at": F.current_timestamp(), "_run_id": F.lit(run_id)}

    # -- bronze ---------------------------------------------------------------------
    with _timed(result, "bronze"):
        history = {s: lake.read(spark, lake_dir, f"bronze_{s}") if lake.is_table(table_path(lake_dir, f"bronze_{s}"))
                   else None for s in STREAMS}
        classified = bronze.classify(bronze.parse_landing(spark, files),
                                     _known_positions(spark, history)).localCheckpoint()
        _bronze_stats(classified, result, last)
        ratio = result.quarantined_total / max(result.records_read, 1)
        if ratio > max_ratio:
            raise GateFailed("max_quarantine_ratio", _quarantine_report(result, ratio, max_ratio))
        new = {s: bronze.bronze_records(classified, s).withColumns(meta).localCheckpoint() for s in STREAMS}
        quarantine = bronze.quarantine_records(classified).withColumns(meta)
        ingested = spark.createDataFrame(
            [(f.stream, f.path, f.size, f.modified_at, result.lines.get(f.path, 0)) for f in files],
            "stream string, path string, size bigint, modified_at bigint, lines bigint").withColumns(meta)
    with _timed(result, "gate:bronze"):
        new_distinct = {s: silver.distinct_records(new[s]) for s in STREAMS}
        gates.check("bronze", gates.bronze_frames(new_distinct["messages"], new_distinct["workflow_events"]),
                    lake_dir)

    # -- silver -------------------------------------------------------------------------
    with _timed(result, "silver"):
        every = {s: silver.distinct_records(new[s] if history[s] is None else history[s].unionByName(new[s]))
                 for s in STREAMS}
        b_messages = every["messages"]
        events = silver.workflow_events(every["workflow_events"])
        new_events = silver.workflow_events(new_distinct["workflow_events"])
        deployments = silver.deployments(events).localCheckpoint()
        msg_keys = b_messages.select("tenant_id", F.col("position").alias("message_key"), "correlation_key", "name")
        opens = events.where(F.col("type") == "SUBSCRIPTION_OPENED")
        labels = routing.key_labels(opens, msg_keys)
        opens_l = routing.with_label(opens, labels)
        msgs_l = routing.with_label(msg_keys, labels)
        touched = _touched_groups(new_distinct["messages"], new_events, opens_l, msgs_l, deployments).localCheckpoint()
        touched_keys = (msgs_l.select("tenant_id", "correlation_key", "label")
                        .unionByName(opens_l.select("tenant_id", "correlation_key", "label"))
                        .join(touched, ["tenant_id", "label"], "left_semi").distinct().localCheckpoint())
        scope = touched_keys.select(*SCOPE)
        silver_messages = silver.accepted_messages(b_messages.join(scope, SCOPE, "left_semi")).localCheckpoint()
        result.touched_groups = touched.count()
    with _timed(result, "gate:silver"):
        gates.check("silver", gates.silver_frames(silver_messages), lake_dir)

    # -- gold -------------------------------------------------------------------------
    with _timed(result, "gold"):
        routed = routing.route_workflow_events(
            events.where(F.col("type") != "PROCESS_DEPLOYED"), opens_l, msgs_l
        ).join(touched, ["tenant_id", "label"], "left_semi")
        engine_in = gold.engine_input(routing.with_label(silver_messages, labels), routed)
        engine_out = gold.run_engine(engine_in, gold.deployments_by_tenant(deployments)).localCheckpoint()
        tables = gold.gold_tables(engine_out, silver_messages, result.as_of)
        result.correlations = tables["correlations"].count()
    with _timed(result, "gate:gold"):
        gates.check("gold", gates.gold_frames(tables), lake_dir)

    # -- commit: every gate passed; the writes run side by side (one table each) --------
    with _timed(result, "write"):
        writes = [
            lambda: lake.append(new["messages"], lake_dir, "bronze_messages", run_id),
            lambda: lake.append(new["workflow_events"], lake_dir, "bronze_workflow_events", run_id),
            lambda: lake.append(quarantine, lake_dir, "quarantine", run_id),
            lambda: lake.append(ingested, lake_dir, "ingested_files", run_id),
            lambda: lake.append(new_events, lake_dir, "silver_workflow_events", run_id),
            lambda: restate(spark, lake.ensure(spark, lake_dir, "silver_messages", silver.SILVER_MESSAGE),
                            silver_messages, scope, ["message_key"]),
        ]
        if result.deployments:
            writes.append(lambda: deployments.write.format("delta").mode("overwrite").save(
                table_path(lake_dir, "silver_deployments")))
        for name in GOLD_TABLES:
            writes.append(lambda n=name: restate(spark, lake.ensure(spark, lake_dir, n, GOLD[n]), tables[n], scope,
                                                 GOLD_KEYS[n]))
        with ThreadPoolExecutor(4) as pool:
            for future in [pool.submit(write) for write in writes]:
                future.result()
        if result.as_of is not None:
            refresh_statuses(spark, table_path(lake_dir, "messages"), result.as_of)
        lake.append(_run_row(spark, result), lake_dir, "runs", run_id)


def _bronze_stats(classified: DataFrame, result: RunResult, last) -> None:
    """Counts of the run's lines (one pass), the max event time and hence as_of."""
    rows = (classified.groupBy("stream", "reason", "_is_replay", "type", "_source_file")
            .agg(F.count("*").alias("n"), F.max(F.coalesce("published_at", "timestamp")).alias("t")).collect())
    for r in rows:
        result.records_read += r["n"]
        result.lines[r["_source_file"]] = result.lines.get(r["_source_file"], 0) + r["n"]
        if r["reason"] is not None:
            result.quarantined[r["reason"]] = result.quarantined.get(r["reason"], 0) + r["n"]
        elif r["_is_replay"]:
            result.replays += r["n"]
        elif r["stream"] == "messages":
            result.new_messages += r["n"]
        else:
            result.new_workflow_events += r["n"]
            result.deployments += r["n"] if r["type"] == "PROCESS_DEPLOYED" else 0
    times = [r["t"] for r in rows if r["reason"] is None and not r["_is_replay"] and r["t"] is not None]
    if last is not None and last["max_event_time"] is not None:
        times.append(last["max_event_time"])
    result.max_event_time = max(times, default=None)
    result.as_of = result.as_of if result.as_of is not None else result.max_event_time


def _known_positions(spark, history: dict) -> DataFrame:
    """(stream, position, hash, file, line) of the records bronze already holds."""
    known = spark.createDataFrame([], "stream string, position bigint, _record_hash string, "
                                      "_source_file string, _line bigint")
    for stream, b in history.items():
        if b is not None:
            known = known.unionByName(b.where(~F.col("_is_replay")).select(
                F.lit(stream).alias("stream"), "position", "_record_hash", "_source_file", "_line"))
    return known


def _touched_groups(new_messages, new_events, opens_l, msgs_l, deployments) -> DataFrame:
    """(tenant_id, label) of every group the run's new records can change."""
    by_message = routing.with_label(
        new_messages.select("tenant_id", "correlation_key"),
        msgs_l.select("tenant_id", "correlation_key", "label").distinct()).select("tenant_id", "label")
    by_event = routing.route_workflow_events(
        new_events.where(F.col("type") != "PROCESS_DEPLOYED"), opens_l, msgs_l).select("tenant_id", "label")
    deployed = new_events.where(F.col("type") == "PROCESS_DEPLOYED").select("tenant_id", "bpmn_process_id")
    start_names = (deployments.join(deployed, ["tenant_id", "bpmn_process_id"], "left_semi")
                   .select("tenant_id", F.explode("message_start_events").alias("name")))
    by_deployment = msgs_l.join(start_names, ["tenant_id", "name"], "left_semi").select("tenant_id", "label")
    return by_message.unionByName(by_event).unionByName(by_deployment).distinct()


def _quarantine_report(result: RunResult, ratio: float, max_ratio: float) -> str:
    reasons = "\n".join(f"  {count:>8}  {reason}" for reason, count in
                        sorted(result.quarantined.items(), key=lambda kv: -kv[1])[:20])
    return (f"quarantined {result.quarantined_total} of {result.records_read} records "
            f"({ratio:.2%}) > max_quarantine_ratio {max_ratio:.2%}; nothing was committed\n{reasons}")


def _run_row(spark, result: RunResult) -> DataFrame:
    summary = json.dumps({"quarantined": result.quarantined, "timings": result.timings,
                          "touched_groups": result.touched_groups, "replays": result.replays})
    return spark.createDataFrame(
        [(result.run_id, result.started_at, result.files, result.records_read, result.quarantined_total,
          result.max_event_time, result.as_of, summary)],
        "run_id string, started_at bigint, files bigint, records_read bigint, quarantined bigint, "
        "max_event_time bigint, as_of bigint, summary string",
    ).select("run_id", F.timestamp_millis("started_at").alias("started_at"),
             F.current_timestamp().alias("finished_at"),
             "files", "records_read", "quarantined", F.timestamp_millis("max_event_time").alias("max_event_time"),
             F.timestamp_millis("as_of").alias("as_of"), "summary")
