"""Key groups: which records the engine must see together (one engine partition each).

The unit is `(tenant_id, correlation_key)`. Two keys are linked, and fall in one
*key group* (labelled by its smallest key), when one can act on the other
through the engine: subscriptions of one owner element instance with different
keys (sibling closing, owner left), and subscriptions inside a message-started
instance whose start message has another key (held instance ends).

Key groups are kept as a table of `(tenant_id, correlation_key, label)` rows, one per key
that is not its own key group's label (every other key is its own label);
`grow_key_groups` updates it from the links that new records bring, so no run recomputes
them from the whole history. ("Group" alone is rule 3's group of opens.)
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.contract.enums import ELEMENT_LEFT, INSTANCE_ENDED, SUBSCRIPTION_OPENED
from correlake.contract.schemas import SCOPE
from correlake.semantics.start_events import started_message_key_sql

Components = Callable[[DataFrame], DataFrame]  # edges (tenant_id, a, b) -> (tenant_id, node, root)


def started_message_key(instance_key: str):
    """The message position inside the start instance key in column `instance_key` (rule 20),
    else null (also for a producer's key of that reserved form that no message position fits)."""
    return F.expr(started_message_key_sql(instance_key))


def owner_links(opens: DataFrame) -> DataFrame:
    """(tenant_id, a, b): keys of subscriptions with one owner element instance."""
    return (opens.groupBy("tenant_id", "element_instance_key")
            .agg(F.collect_set("correlation_key").alias("keys"))
            .where(F.size("keys") > 1)
            .select("tenant_id", F.array_min("keys").alias("a"), F.explode("keys").alias("b")))


def started_links(opens: DataFrame, messages: DataFrame) -> DataFrame:
    """(tenant_id, a, b): a subscription's key and the key of the message that started its instance."""
    return (opens.select("tenant_id", "correlation_key",
                         started_message_key("process_instance_key").alias("message_key"))
            .where(F.col("message_key").isNotNull())
            .join(messages.select("tenant_id", "message_key", F.col("correlation_key").alias("b")),
                  ["tenant_id", "message_key"])
            .select("tenant_id", F.col("correlation_key").alias("a"), "b"))


def both_ways(edges: DataFrame) -> DataFrame:
    """Undirected `edges` (tenant_id, a, b) as directed ones, each way once."""
    return edges.unionByName(edges.select("tenant_id", F.col("b").alias("a"), F.col("a").alias("b"))).distinct()


def first_parents(edges: DataFrame) -> DataFrame:
    """(tenant_id, node, parent): each node of directed `edges` its own parent, as rounds start."""
    return edges.select("tenant_id", F.col("a").alias("node"), F.col("a").alias("parent")).distinct()


def changed_parents(new: DataFrame, parent: DataFrame) -> DataFrame:
    """The nodes whose parent a round changed (none: every parent is its component's smallest node)."""
    return (new.join(parent.withColumnRenamed("parent", "old"), ["tenant_id", "node"])
            .where(F.col("parent") != F.col("old")))


def smallest_roots(edges: list) -> list[tuple[str, str, str]]:
    """(tenant_id, node, root) for every node of `edges` (rows of tenant_id, a, b) by
    union-find, root the smallest node of its component. Python orders strings by code
    point, which is Spark's order of their UTF-8 bytes."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        while (up := parent.setdefault(x, x)) != x:
            parent[x] = parent[up]  # halve the path
            x = parent[x]
        return x

    for tenant, a, b in edges:
        ra, rb = find((tenant, a)), find((tenant, b))
        parent[max(ra, rb)] = min(ra, rb)
    return [(tenant, node, find((tenant, node))[1]) for tenant, node in list(parent)]


def from_neighbours(edges: DataFrame, parent: DataFrame) -> DataFrame:
    """A round in which each node takes the smallest parent of itself and its neighbours."""
    offered = (edges.join(parent.withColumnRenamed("node", "b"), ["tenant_id", "b"])
               .select("tenant_id", F.col("a").alias("node"), "parent"))
    return parent.unionByName(offered).groupBy("tenant_id", "node").agg(F.min("parent").alias("parent"))


def fastsv(edges: DataFrame, parent: DataFrame) -> DataFrame:
    """A FastSV round: each node takes the smallest of its grandparent and its
    neighbours' grandparents, and offers the latter to its parent as well."""
    grand = parent.join(parent.select("tenant_id", F.col("node").alias("parent"), F.col("parent").alias("grand")),
                        ["tenant_id", "parent"])  # grand <= parent <= node
    offered = (edges.join(grand.select("tenant_id", F.col("node").alias("b"), F.col("grand").alias("offer")),
                          ["tenant_id", "b"])
               .join(grand.select("tenant_id", F.col("node").alias("a"), "parent"), ["tenant_id", "a"]))
    offers = (grand.select("tenant_id", "node", F.col("grand").alias("offer"))
              .unionByName(offered.select("tenant_id", F.col("a").alias("node"), "offer"))
              .unionByName(offered.select("tenant_id", F.col("parent").alias("node"), "offer")))
    return offers.groupBy("tenant_id", "node").agg(F.min("offer").alias("parent"))


def linking(links: DataFrame) -> DataFrame:
    """The `links` (tenant_id, a, b) between two different keys (a key linked to itself links nothing)."""
    return links.where(F.col("a") != F.col("b"))


def grow_key_groups(key_groups: DataFrame, links: DataFrame, components: Components) -> DataFrame:
    """The rows of the key group table that `links` (tenant_id, a, b; from `linking`) add or change.

    Key groups only merge: every key group a link touches joins the key group of the
    smallest label among them, and its keys (its label included) get that label.
    `components(edges)`: (tenant_id, node, root), root the smallest node of the node's
    connected component of `edges` (the Spark backend's rounds of `from_neighbours` and
    `fastsv`, or `smallest_roots` on the driver).
    """
    keys = links.select("tenant_id", F.col("a").alias("correlation_key")).unionByName(
        links.select("tenant_id", F.col("b").alias("correlation_key"))).distinct()
    labels = with_label(keys, key_groups)
    label_of = lambda side: labels.select(  # noqa: E731
        "tenant_id", F.col("correlation_key").alias(side), F.col("label").alias(f"l{side}"))
    merged = (links.join(label_of("a"), ["tenant_id", "a"]).join(label_of("b"), ["tenant_id", "b"])
              .select("tenant_id", F.col("la").alias("a"), F.col("lb").alias("b"))
              .where(F.col("a") != F.col("b")).distinct())
    moved = components(merged).where(F.col("node") != F.col("root"))
    roots = moved.select("tenant_id", F.col("node").alias("correlation_key"), F.col("root").alias("label"))
    members = (key_groups.join(moved.withColumnRenamed("node", "label"), ["tenant_id", "label"])
               .select("tenant_id", "correlation_key", F.col("root").alias("label")))
    return roots.unionByName(members)


def updated_key_groups(key_groups: DataFrame, changed: DataFrame) -> DataFrame:
    """The key group table with `changed` rows applied."""
    return key_groups.join(changed, SCOPE, "left_anti").unionByName(changed)


def with_label(df: DataFrame, key_groups: DataFrame) -> DataFrame:
    """Add `label`, the key group of the row's (tenant_id, correlation_key)."""
    return (df.join(key_groups.withColumnRenamed("label", "_label"), SCOPE, "left")
            .withColumn("label", F.coalesce(F.col("_label"), F.col("correlation_key")))
            .drop("_label"))


def route_workflow_events(events: DataFrame, opens_labelled: DataFrame, messages_labelled: DataFrame) -> DataFrame:
    """Workflow events (not deployments) with the `label` of every key group they act on.

    Opens go to their key's key group; ELEMENT_LEFT to the key groups of the owner's
    subscriptions; INSTANCE_ENDED to those of the instance's subscriptions and, for a
    message-started instance, to its start message's key group.
    """
    opens = events.where(F.col("type") == SUBSCRIPTION_OPENED).join(
        opens_labelled.select("position", "label"), "position")
    owners = opens_labelled.select("tenant_id", "element_instance_key", "label").distinct()
    left = events.where(F.col("type") == ELEMENT_LEFT).join(owners, ["tenant_id", "element_instance_key"])
    instances = opens_labelled.select("tenant_id", "process_instance_key", "label")
    ended = events.where(F.col("type") == INSTANCE_ENDED)
    by_sub = ended.join(instances.distinct(), ["tenant_id", "process_instance_key"])
    by_start = (ended.withColumn("message_key", started_message_key("process_instance_key"))
                .join(messages_labelled.select("tenant_id", "message_key", "label"), ["tenant_id", "message_key"])
                .drop("message_key"))
    # One row per (event, label): only an end can reach one key group both ways.
    return opens.unionByName(left).unionByName(by_sub.unionByName(by_start).distinct())
