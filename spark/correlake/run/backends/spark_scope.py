"""The Spark backend's scope: `transforms/scope.py`'s rules over silver's key columns, with
the checkpoints and join hints that keep their plans small. Its twin over Python sets, the
driver backend's, is `driver_scope.plan`.

The key columns are checkpointed once with the new records' for the lookups (whose joins
with the run's small sets are then cheap to plan and run), and the full rows of the
touched key groups are fetched once at the end. A run also gives the key columns as its
publish leaves silver (`Recompute.history_after`), which a process that runs the lake
again may cache (`caches/history_keys.py`) rather than read them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.config import COMPONENTS_ON_DRIVER
from correlake.contract.schemas import KEY_GROUPS, MESSAGE_FIELDS, SCOPE, TOUCHED
from correlake.lake import deltars
from correlake.run.backends import replay
from correlake.runtime.hints import broadcast_if_small, hint_for, without_estimate
from correlake.transforms import key_groups as groups
from correlake.transforms.scope import (
    EVENT_KEYS,
    MESSAGE_KEYS,
    HistoryKeys,
    deployed,
    every_link,
    message_keys,
    message_records,
    new_links,
    opened,
    scope_keys,
    touched_groups,
    union,
)

MAX_ROUNDS = 64  # of `components`: it takes about log2 of the longest chain of links
NEIGHBOUR_ROUNDS = 3  # its first rounds, the cheaper kind


@dataclass
class Recompute:
    """A run's work: the key group rows it adds or changes, the touched key groups' keys
    (tenant_id, correlation_key, label), their distinct message records (for rule 7:
    `silver.accepted_messages`) and their routed workflow events (with their labels); and
    the key columns of silver with the new records (`history_after`). The key group
    changes and the scope are checkpointed."""
    key_group_changes: DataFrame
    scope: DataFrame
    message_records: DataFrame
    routed: DataFrame
    all_message_keys: DataFrame  # the key columns of every message, the history's and the new records
    event_keys: DataFrame  # the history's and the new records'
    key_groups: DataFrame  # the key group table after the changes

    def history_after(self, silver_messages: DataFrame) -> HistoryKeys:
        """The key columns of silver once the run's `silver_messages` (its touched key groups' from
        their replay points) replace those rows: what the run's publish leaves (no Spark job)."""
        rows = message_records(silver_messages).select(*MESSAGE_KEYS)
        return HistoryKeys(rows.unionByName(self.all_message_keys.join(rows.select("position"), "position", "left_anti")),
                           self.event_keys, self.key_groups)


def recompute(new_messages: DataFrame, new_events: DataFrame, old_messages: DataFrame | None,
              old_events: DataFrame | None, old_keys: HistoryKeys | None, deployments: DataFrame,
              redeployed: bool) -> Recompute:
    """Plan the recomputation of every key group that the new records can change.

    `new_messages`: distinct new message records; `new_events`: new silver workflow
    events; `old_messages`, `old_events`: what silver held before, `old_keys` their key
    columns and the key group table, checkpointed (None: no history); `deployments`: every
    deployment, new ones included; `redeployed`: whether there are new ones.
    """
    all_messages = union(new_messages.select(*MESSAGE_FIELDS), old_messages)
    all_events = union(new_events, old_events)
    messages = union(new_messages.select(*MESSAGE_KEYS), old_keys and old_keys.messages).localCheckpoint()
    events = union(new_events.select(*EVENT_KEYS), old_keys and old_keys.events).localCheckpoint()
    opens = events.where(opened())
    if old_keys is None:  # no history: every key is new, every key group touched
        changes, key_groups = _changes_and_key_groups(None, every_link(opens, messages))
        keys = messages.select(*SCOPE).unionByName(opens.select(*SCOPE))
        touched = groups.with_label(keys, key_groups).select("tenant_id", "label").distinct().localCheckpoint()
        scope = _scope(key_groups, touched)
        key_groups_hint = broadcast_if_small(key_groups)
        in_scope = lambda df: groups.with_label(df, key_groups_hint(key_groups))  # noqa: E731  (the table gives labels)
        scoped = all_messages
    else:
        new_hint = broadcast_if_small(new_messages, new_events)
        links = (every_link(opens, messages) if old_keys.key_groups is None
                 else new_links(opens, messages, new_messages, new_events, new_hint))
        changes, key_groups = _changes_and_key_groups(old_keys.key_groups, links)
        scope = _scope(key_groups, touched_groups(new_messages, new_events, messages, opens, key_groups,
                                                  deployments if redeployed else None, new_hint).localCheckpoint())
        scope_hint = broadcast_if_small(scope)
        in_scope = lambda df: df.join(scope_hint(scope), SCOPE)  # noqa: E731  (adds label)
        touched_keys = scope_hint(scope.select(*SCOPE))
        scoped = all_messages.join(touched_keys, SCOPE, "left_semi")
    # Routing through the touched key groups' opens and messages only gives exactly their events.
    routed = (groups.route_workflow_events(events.where(~deployed()), in_scope(opens), in_scope(message_keys(messages)))
              .select("position", "label").localCheckpoint())
    routed_count = routed.count()
    return Recompute(key_group_changes=changes, scope=scope, message_records=scoped,
                     routed=all_events.join(hint_for(routed_count)(routed), "position"),
                     all_message_keys=messages, event_keys=events, key_groups=key_groups)


def _scope(key_groups: DataFrame, touched: DataFrame) -> DataFrame:
    """`scope_keys`, the touched key groups (checkpointed) broadcast if few, checkpointed."""
    return scope_keys(key_groups, broadcast_if_small(touched)(touched)).localCheckpoint()


def _changes_and_key_groups(old_key_groups: DataFrame | None, links: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(the key group rows the links add or change, every key group after them)."""
    none = links.sparkSession.createDataFrame([], KEY_GROUPS)
    key_groups = none if old_key_groups is None else old_key_groups
    links = groups.linking(links).localCheckpoint()
    if links.isEmpty():  # most hourly runs link no two keys: the table stays as it is
        return none, key_groups
    changes = groups.grow_key_groups(key_groups, links, components).localCheckpoint()
    if changes.isEmpty():  # the keys they link are in one key group already
        return changes, key_groups
    return changes, groups.updated_key_groups(key_groups, changes).localCheckpoint()


def components(edges: DataFrame, on_driver_max: int = COMPONENTS_ON_DRIVER) -> DataFrame:
    """(tenant_id, node, root) for every node of undirected `edges` (tenant_id, a, b):
    root is the smallest node of its connected component.

    Up to `on_driver_max` edges (an hourly run's few new links), the driver solves them
    by union-find (`key_groups.smallest_roots`): one collect instead of a Spark round's jobs.
    Otherwise every node has a parent, a node of its component no larger than itself; when a
    round changes no parent, every node's parent is its component's smallest node. The first
    rounds pass the smallest parent among a node's neighbours (`key_groups.from_neighbours`:
    enough for the small key groups of most runs, two rounds); later ones are FastSV's
    (`key_groups.fastsv`), in which a chain of n links takes about log2(n) rounds."""
    edges = groups.both_ways(edges).localCheckpoint()
    if len(few := edges.limit(on_driver_max + 1).collect()) <= on_driver_max:
        return edges.sparkSession.createDataFrame(groups.smallest_roots(few),
                                                  "tenant_id string, node string, root string")
    parent = groups.first_parents(edges).localCheckpoint()
    for rounds in range(MAX_ROUNDS):
        if rounds < NEIGHBOUR_ROUNDS:
            new = groups.from_neighbours(edges, parent).localCheckpoint()
        else:  # the rounds join the parents with themselves: a carried size estimate would explode
            new = without_estimate(groups.fastsv(edges, parent))
        unchanged = groups.changed_parents(new, parent).isEmpty()  # not a LIMIT: its class is compiled anew each time
        parent = new
        if unchanged:
            return parent.withColumnRenamed("parent", "root")
    raise RuntimeError("key groups did not converge")


def replayed(work: Recompute, gold: dict[str, DataFrame | None] | None, new_messages: DataFrame,
             new_events: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(the touched keys with their key groups' replay points (TOUCHED: `run/backends/replay.py`,
    from `gold`'s tables before the run; None: none), the message records and routed events
    from there). What `replay.points` reads is fetched."""
    if gold is None:
        return work.scope.withColumn("since", F.lit(None).cast("timestamp")), work.message_records, work.routed
    messages, routed = work.message_records.localCheckpoint(), work.routed.localCheckpoint()
    scope = deltars.tuples(work.scope.select(*KEY_GROUPS.names).toArrow())
    new = {(stream, p) for stream, frame in (("m", new_messages), ("e", new_events))
           for p in frame.select("position").toArrow()["position"].to_pylist()}
    keys = broadcast_if_small(work.scope)(work.scope.select(*SCOPE))
    rows = {name: None if frame is None else frame.join(keys, SCOPE, "left_semi").select(*replay.GOLD_COLUMNS[name])
            .toArrow() for name, frame in gold.items()}
    since = replay.points(rows, scope, messages.select(*replay.MESSAGE_COLUMNS).toArrow(),
                          routed.select(*replay.EVENT_COLUMNS).toArrow(), new)
    touched = work.scope.sparkSession.createDataFrame(deltars.from_rows(TOUCHED, replay.touched(scope, since)),
                                                      TOUCHED)
    points = broadcast_if_small(touched)(touched)
    if not since:
        return touched, messages, routed

    def kept(rows: DataFrame, on: list[str], column: str) -> DataFrame:
        return (rows.join(points.select(*on, "since").distinct(), on, "left")
                .where(F.col("since").isNull() | (F.col(column) >= F.col("since"))).drop("since"))

    return touched, kept(messages, SCOPE, "published_at"), kept(routed, ["tenant_id", "label"], "timestamp")
