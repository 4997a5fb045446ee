"""Gold: the engine run over partitions, and the four contract tables."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from correlake.contract.schemas import ENGINE_OUT, GOLD, as_timestamps
from correlake.lake.sqlfiles import message_status
from correlake.semantics import order
from correlake.semantics.engine import correlate_partition
from correlake.transforms.sequential import sequential_pass, sequential_pass_on_driver
from correlake.transforms.silver import millis, pair_key

ENGINE_COLUMNS = ["_part", "kind", *order.SORT_COLUMNS, "tenant_id", "name", "correlation_key", "ttl_ms", "accepted",
                  "variables", "bpmn_process_id", "process_version", "process_instance_key", "element_instance_key",
                  "element_id", "element_type", "message_name", "interrupting"]


def _part():
    return pair_key("tenant_id", "label")


def engine_input(messages: DataFrame, routed_events: DataFrame, ends_last: bool = False) -> DataFrame:
    """One frame of engine records (`semantics/order.py`): labelled silver messages + routed
    workflow events, whose kind is their type; `ends_last`: a lake of exporter records' ranks."""
    m = (messages.withColumn("_part", _part())
         .select("_part", F.lit(order.MESSAGE_PUBLISHED).alias("kind"), millis("published_at").alias(order.TIME),
                 F.lit(order.MESSAGE_RANK).alias(order.RANK), F.col("message_key").alias(order.GROUP_POSITION),
                 F.col("message_key").alias(order.POSITION), "tenant_id", "name", "correlation_key", "ttl_ms",
                 F.col("duplicate_of").isNull().alias("accepted"), "variables"))
    opened = F.col("kind") == order.SUBSCRIPTION_OPENED
    # rule 3's group: the opens of one element instance at one instant (all in one key group)
    group = Window.partitionBy("_part", "element_instance_key", order.TIME)
    w = (routed_events.withColumn("_part", _part())
         .withColumn(order.TIME, millis("timestamp"))
         .withColumn("kind", F.col("type"))
         .withColumn(order.RANK, F.when(F.col("type").isin(*order.ENDS), F.lit(order.rank(order.ELEMENT_LEFT, ends_last)))
                     .otherwise(F.lit(order.WORKFLOW_RANK)))
         .withColumn(order.GROUP_POSITION, F.when(opened, F.min(F.when(opened, F.col(order.POSITION))).over(group))
                     .otherwise(F.col(order.POSITION))))
    return m.unionByName(w.select(*[c for c in ENGINE_COLUMNS if c in w.columns]), allowMissingColumns=True) \
        .select(*ENGINE_COLUMNS)


def deployments_by_tenant(deployments: DataFrame) -> dict[str, list[dict]]:
    """Every deployment, per tenant, in the total order (small: collected to the driver)."""
    by_tenant: dict[str, list[dict]] = {}
    rows = deployments.select("tenant_id", millis("deployed_at").alias(order.TIME), order.POSITION, "bpmn_process_id",
                              "process_version", "message_start_events").collect()
    for row in sorted((row.asDict() for row in rows), key=order.deployment_sort_key):
        by_tenant.setdefault(row["tenant_id"], []).append(row)
    return by_tenant


def _per_partition(deployments: dict[str, list[dict]]):
    """The engine over one partition's sorted rows, as ENGINE_OUT rows (one struct set per row)."""

    def correlate(_, rows):
        tenant = rows[0]["tenant_id"]
        out = correlate_partition(tenant, rows, deployments.get(tenant, []))
        for row in out["correlations"]:
            yield {"correlation": row}
        for row in out["subscriptions"]:
            yield {"subscription": row}
        for row in out["message_started_instances"]:
            yield {"instance": row}

    return correlate


def run_engine(events: DataFrame, deployments: dict[str, list[dict]]) -> DataFrame:
    """Correlate every partition in Spark's Python workers; rows of ENGINE_OUT."""
    return sequential_pass(events, "_part", list(order.SORT_COLUMNS), ENGINE_OUT, _per_partition(deployments))


def run_engine_in_driver(events: DataFrame, deployments: dict[str, list[dict]]) -> DataFrame:
    """`run_engine` with the engine in this process, for the driver backend's runs."""
    return sequential_pass_on_driver(events, "_part", order.record_sort_key, ENGINE_OUT, _per_partition(deployments))


def gold_tables(engine_out: DataFrame, silver_messages: DataFrame, as_of_millis: int) -> dict[str, DataFrame]:
    """The four gold tables' rows for the partitions that were run."""
    def table(field: str, name: str) -> DataFrame:
        return as_timestamps(engine_out.where(F.col(field).isNotNull()).select(f"{field}.*"), GOLD[name])

    correlations = table("correlation", "correlations")
    counts = correlations.groupBy("message_key").agg(F.count("*").cast("int").alias("correlation_count"))
    messages = (silver_messages.join(counts, "message_key", "left")
                .withColumn("correlation_count", F.coalesce("correlation_count", F.lit(0))))
    status = F.expr(message_status(as_of_millis))  # rule 23
    messages = messages.withColumn("status", status).select(*GOLD["messages"].fieldNames())
    return {
        "correlations": correlations,
        "messages": messages,
        "subscriptions": table("subscription", "subscriptions"),
        "message_started_instances": table("instance", "message_started_instances"),
    }

