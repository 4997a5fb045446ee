"""Partitioning of the problem: which records the engine must see together.

The unit is `(tenant_id, correlation_key)`. Two keys are linked, and fall in one
partition (a *group*, labelled by its smallest key), when one can act on the other
through the engine: subscriptions of one owner element instance with different
keys (sibling closing, owner left), and subscriptions inside a message-started
instance whose start message has another key (held instance ends).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .engine import START_PREFIX

MAX_ROUNDS = 50


def started_message_key(instance_key):
    """The message position inside `msg-start:{process}:{message_key}`, else null."""
    return F.when(instance_key.startswith(START_PREFIX),
                  F.regexp_extract(instance_key, r":(-?\d+)$", 1).cast("bigint"))


def key_edges(opens: DataFrame, messages: DataFrame) -> DataFrame:
    """(tenant_id, a, b): keys that must be processed together, both directions."""
    by_owner = (opens.groupBy("tenant_id", "element_instance_key")
                .agg(F.collect_set("correlation_key").alias("keys"))
                .where(F.size("keys") > 1)
                .select("tenant_id", F.array_min("keys").alias("a"), F.explode("keys").alias("b")))
    started = (opens.select("tenant_id", "correlation_key",
                            started_message_key(F.col("process_instance_key")).alias("message_key"))
               .where(F.col("message_key").isNotNull())
               .join(messages.select("tenant_id", "message_key", F.col("correlation_key").alias("b")),
                     ["tenant_id", "message_key"])
               .select("tenant_id", F.col("correlation_key").alias("a"), "b"))
    edges = by_owner.unionByName(started).where(F.col("a") != F.col("b"))
    return edges.unionByName(edges.select("tenant_id", F.col("b").alias("a"), F.col("a").alias("b"))).distinct()


def key_labels(opens: DataFrame, messages: DataFrame) -> DataFrame:
    """(tenant_id, correlation_key, label) for linked keys: connected components by
    min-label propagation. Keys absent from the result are their own label."""
    edges = key_edges(opens, messages).localCheckpoint()
    labels = edges.select("tenant_id", F.col("a").alias("correlation_key"), F.col("a").alias("label")).distinct()
    if edges.isEmpty():
        return labels.localCheckpoint()
    for _ in range(MAX_ROUNDS):
        offered = (edges.join(labels.withColumnRenamed("correlation_key", "b"), ["tenant_id", "b"])
                   .select("tenant_id", F.col("a").alias("correlation_key"), "label"))
        new = (labels.unionByName(offered).groupBy("tenant_id", "correlation_key")
               .agg(F.min("label").alias("label")).localCheckpoint())
        changed = (new.join(labels.withColumnRenamed("label", "old"), ["tenant_id", "correlation_key"])
                   .where(F.col("label") != F.col("old")).limit(1).count())
        labels = new
        if not changed:
            return labels
    raise RuntimeError("key groups did not converge")


def with_label(df: DataFrame, labels: DataFrame) -> DataFrame:
    """Add `label`, the group of the row's (tenant_id, correlation_key)."""
    return (df.join(labels.withColumnRenamed("label", "_label"), ["tenant_id", "correlation_key"], "left")
            .withColumn("label", F.coalesce(F.col("_label"), F.col("correlation_key")))
            .drop("_label"))


def route_workflow_events(events: DataFrame, opens_labelled: DataFrame, messages_labelled: DataFrame) -> DataFrame:
    """Workflow events (not deployments) with the `label` of every group they act on.

    Opens go to their key's group; ELEMENT_LEFT to the groups of the owner's
    subscriptions; INSTANCE_ENDED to those of the instance's subscriptions and, for a
    message-started instance, to its start message's group.
    """
    opens = events.where(F.col("type") == "SUBSCRIPTION_OPENED").join(
        opens_labelled.select("position", "label"), "position")
    owners = opens_labelled.select("tenant_id", "element_instance_key", "label").distinct()
    left = events.where(F.col("type") == "ELEMENT_LEFT").join(owners, ["tenant_id", "element_instance_key"])
    instances = opens_labelled.select("tenant_id", "process_instance_key", "label")
    ended = events.where(F.col("type") == "INSTANCE_ENDED")
    by_sub = ended.join(instances.distinct(), ["tenant_id", "process_instance_key"])
    by_start = (ended.withColumn("message_key", started_message_key(F.col("process_instance_key")))
                .join(messages_labelled.select("tenant_id", "message_key", "label"), ["tenant_id", "message_key"])
                .drop("message_key"))
    return opens.unionByName(left).unionByName(by_sub).unionByName(by_start).distinct()
