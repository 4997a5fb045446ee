"""Gold: the engine run over partitions, and the four contract tables."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from correlake.semantics.engine import correlate_partition
from correlake.transforms.hints import broadcast_if_small
from correlake.contract.schemas import ENGINE_OUT, GOLD, SCOPE, as_timestamps
from correlake.transforms.sequential import sequential_pass
from correlake.transforms.silver import millis, pair_key
from correlake.lake.sqlfiles import fill

_KINDS = {"SUBSCRIPTION_OPENED": "O", "ELEMENT_LEFT": "L", "INSTANCE_ENDED": "E"}
ENGINE_COLUMNS = ["_part", "kind", "t", "rank", "grp", "position", "tenant_id", "name", "correlation_key",
                  "ttl_ms", "accepted", "variables", "bpmn_process_id", "process_version",
                  "process_instance_key", "element_instance_key", "element_id", "element_type",
                  "message_name", "interrupting"]


def _part():
    return pair_key("tenant_id", "label")


def engine_input(messages: DataFrame, routed_events: DataFrame) -> DataFrame:
    """One frame of engine events: labelled silver messages + routed workflow events."""
    m = (messages.withColumn("_part", _part())
         .select("_part", F.lit("M").alias("kind"), millis("published_at").alias("t"), F.lit(1).alias("rank"),
                 F.col("message_key").alias("grp"), F.col("message_key").alias("position"), "tenant_id", "name",
                 "correlation_key", "ttl_ms", F.col("duplicate_of").isNull().alias("accepted"), "variables"))
    kind = F.create_map(*[F.lit(x) for pair in _KINDS.items() for x in pair])[F.col("type")]
    group = Window.partitionBy("_part", "element_instance_key", "t")
    w = (routed_events.withColumn("_part", _part())
         .withColumn("t", millis("timestamp"))
         .withColumn("kind", kind)
         .withColumn("rank", F.lit(0))
         .withColumn("grp", F.when(F.col("kind") == "O", F.min("position").over(group.orderBy()))
                     .otherwise(F.col("position"))))
    return m.unionByName(w.select(*[c for c in ENGINE_COLUMNS if c in w.columns]), allowMissingColumns=True) \
        .select(*ENGINE_COLUMNS)


def deployments_by_tenant(deployments: DataFrame) -> dict[str, list[dict]]:
    """Every deployment, per tenant, in the total order (small: collected to the driver)."""
    by_tenant: dict[str, list[dict]] = {}
    rows = deployments.select("tenant_id", millis("deployed_at").alias("t"), "position", "bpmn_process_id",
                              "process_version", "message_start_events").collect()
    for row in sorted(rows, key=lambda r: (r["t"], r["position"])):
        by_tenant.setdefault(row["tenant_id"], []).append(row.asDict())
    return by_tenant


def run_engine(events: DataFrame, deployments: dict[str, list[dict]]) -> DataFrame:
    """Correlate every partition; rows of ENGINE_OUT (one struct set per row)."""

    def per_partition(_, rows):
        tenant = rows[0]["tenant_id"]
        out = correlate_partition(tenant, rows, deployments.get(tenant, []))
        for row in out["correlations"]:
            yield {"correlation": row}
        for row in out["subscriptions"]:
            yield {"subscription": row}
        for row in out["message_started_instances"]:
            yield {"instance": row}

    return sequential_pass(events, "_part", ["t", "rank", "grp", "position"], ENGINE_OUT, per_partition)


def gold_tables(engine_out: DataFrame, silver_messages: DataFrame, as_of_millis: int) -> dict[str, DataFrame]:
    """The four gold tables' rows for the partitions that were run."""
    def table(field: str, name: str) -> DataFrame:
        return as_timestamps(engine_out.where(F.col(field).isNotNull()).select(f"{field}.*"), GOLD[name])

    correlations = table("correlation", "correlations")
    counts = correlations.groupBy("message_key").agg(F.count("*").cast("int").alias("correlation_count"))
    messages = (silver_messages.join(counts, "message_key", "left")
                .withColumn("correlation_count", F.coalesce("correlation_count", F.lit(0))))
    messages = at_as_of(messages, as_of_millis).select(*GOLD["messages"].fieldNames())
    return {
        "correlations": correlations,
        "messages": messages,
        "subscriptions": table("subscription", "subscriptions"),
        "message_started_instances": table("instance", "message_started_instances"),
    }


def at_as_of(messages: DataFrame, as_of_millis: int | None) -> DataFrame:
    """Gold messages with `as_of` and their status at that time (semantics rule 23)."""
    return (messages.withColumn("as_of", F.timestamp_millis(F.lit(as_of_millis)))
            .withColumn("status", F.expr(fill("message_status", as_of="as_of"))))


def messages_at(messages: DataFrame, as_of_millis: int, rows: DataFrame | None = None,
                scope: DataFrame | None = None) -> DataFrame:
    """gold/messages (`messages`) with every status evaluated again at `as_of`, the `scope`
    keys' rows replaced by `rows`. A new `as_of` changes every row: writing this frame once
    does what a MERGE and an UPDATE of every row would, in about half the time."""
    if rows is not None:
        messages = messages.join(broadcast_if_small(scope)(scope), SCOPE, "left_anti").unionByName(rows)
    return at_as_of(messages, as_of_millis)
