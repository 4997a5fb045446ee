"""What a run recomputes: the key groups its new records touch, and their records.

The key groups (`key_groups.py`) are kept in `silver/key_groups` and grown from the links
the new records bring. History comes from silver (`silver/messages`,
`silver/workflow_events`): its key columns (`HistoryKeys`) are checkpointed once with the
new records' for the lookups (whose joins with the run's small sets are then cheap to
plan and run), and the full rows of the touched key groups are fetched once at the end,
so the costly work — rule 7, the engine, the restating MERGEs — is done for the touched
key groups only. A run also gives the key columns as its publish leaves silver
(`Recompute.history_after`), which a process that runs the lake again may keep
(`caches/history_keys.py`) rather than read them again.
With no key group table yet (a first run, a rebuild, a lake from before it existed),
every link of the records given is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.contract.enums import PROCESS_DEPLOYED, SUBSCRIPTION_OPENED
from correlake.contract.schemas import KEY_GROUPS, MESSAGE_FIELDS, SCOPE
from correlake.runtime.hints import broadcast_if_small, hint_for
from correlake.transforms.key_groups import (
    grow_key_groups,
    linking,
    owner_links,
    route_workflow_events,
    started_links,
    started_message_key,
    updated_key_groups,
    with_label,
)

EVENT_KEYS = ["position", "tenant_id", "type", "process_instance_key", "element_instance_key", "correlation_key"]
MESSAGE_KEYS = ["position", *SCOPE, "name"]


def _opened():
    return F.col("type") == SUBSCRIPTION_OPENED


def _deployed():
    return F.col("type") == PROCESS_DEPLOYED


@dataclass(frozen=True)
class HistoryKeys:
    """The key columns of silver: of its messages (MESSAGE_KEYS), of its workflow events
    (EVENT_KEYS), and its key group table, checkpointed (None: the lake has none yet)."""
    messages: DataFrame
    events: DataFrame
    key_groups: DataFrame | None

    @classmethod
    def read(cls, old_messages: DataFrame, old_events: DataFrame, old_key_groups: DataFrame | None) -> HistoryKeys:
        """The key columns of silver's message records and workflow events (read when used,
        with the new records'), and the key group table (read now)."""
        return cls(old_messages.select(*MESSAGE_KEYS), old_events.select(*EVENT_KEYS),
                   None if old_key_groups is None else old_key_groups.localCheckpoint())


@dataclass
class Recompute:
    """A run's work: the key group rows it adds or changes, the touched key groups' keys
    (tenant_id, correlation_key, label), their distinct message records (for rule 7:
    `silver.accepted_messages`) and their routed workflow events (with their labels); and
    the key columns of silver with the new records (`history_after`). The
    key group changes and the scope are checkpointed."""
    key_group_changes: DataFrame
    scope: DataFrame
    message_records: DataFrame
    routed: DataFrame
    untouched_keys: DataFrame | None  # the key columns of the messages of key groups not touched (None: none)
    event_keys: DataFrame  # the history's and the new records'
    key_groups: DataFrame  # the key group table after the changes

    def history_after(self, silver_messages: DataFrame) -> HistoryKeys:
        """The key columns of silver once the run's `silver_messages` (its touched key groups')
        replace those of the touched key groups: what the run's publish leaves (no Spark job)."""
        return HistoryKeys(_union(message_records(silver_messages).select(*MESSAGE_KEYS), self.untouched_keys),
                           self.event_keys, self.key_groups)


def message_records(silver_messages: DataFrame) -> DataFrame:
    """Silver messages back in the shape of distinct bronze records."""
    return silver_messages.select(F.col("message_key").alias("position"), *MESSAGE_FIELDS[1:])


def _keys(messages: DataFrame) -> DataFrame:
    return messages.select("tenant_id", F.col("position").alias("message_key"), "correlation_key", "name")


def _union(new: DataFrame, old: DataFrame | None) -> DataFrame:
    return new if old is None else old.unionByName(new)


def recompute(new_messages: DataFrame, new_events: DataFrame, old_messages: DataFrame | None,
              old_events: DataFrame | None, old_keys: HistoryKeys | None, deployments: DataFrame,
              redeployed: bool) -> Recompute:
    """Plan the recomputation of every key group that the new records can change.

    `new_messages`: distinct new message records; `new_events`: new silver workflow
    events; `old_messages`, `old_events`: what silver held before, `old_keys` their key
    columns and the key group table (None: no history); `deployments`: every
    deployment, new ones included; `redeployed`: whether there are new ones.
    """
    all_messages = _union(new_messages.select(*MESSAGE_FIELDS), old_messages)
    all_events = _union(new_events, old_events)
    messages = _union(new_messages.select(*MESSAGE_KEYS), old_keys and old_keys.messages).localCheckpoint()
    events = _union(new_events.select(*EVENT_KEYS), old_keys and old_keys.events).localCheckpoint()
    opens = events.where(_opened())
    if old_keys is None:  # no history: every key is new, every key group touched
        changes, key_groups = _grown(None, _every_link(opens, messages))
        keys = messages.select(*SCOPE).unionByName(opens.select(*SCOPE))
        scope = _scope(key_groups, with_label(keys, key_groups).select("tenant_id", "label").distinct()
                       .localCheckpoint())
        key_groups_hint = broadcast_if_small(key_groups)
        in_scope = lambda df: with_label(df, key_groups_hint(key_groups))  # noqa: E731  (the table alone gives labels)
        scoped, untouched = all_messages, None
    else:
        new_hint = broadcast_if_small(new_messages, new_events)
        links = (_every_link(opens, messages) if old_keys.key_groups is None
                 else _new_links(opens, messages, new_messages, new_events, new_hint))
        changes, key_groups = _grown(old_keys.key_groups, links)
        scope = _scope(key_groups, _touched(new_messages, new_events, messages, opens, key_groups,
                                        deployments if redeployed else None, new_hint).localCheckpoint())
        scope_hint = broadcast_if_small(scope)
        in_scope = lambda df: df.join(scope_hint(scope), SCOPE)  # noqa: E731  (adds label)
        touched_keys = scope_hint(scope.select(*SCOPE))
        scoped = all_messages.join(touched_keys, SCOPE, "left_semi")
        untouched = messages.join(touched_keys, SCOPE, "left_anti").select(*MESSAGE_KEYS)
    # Routing through the touched key groups' opens and messages only gives exactly their events.
    routed = (route_workflow_events(events.where(~_deployed()), in_scope(opens), in_scope(_keys(messages)))
              .select("position", "label").localCheckpoint())
    routed_count = routed.count()
    return Recompute(
        key_group_changes=changes,
        scope=scope,
        message_records=scoped,
        routed=all_events.join(hint_for(routed_count)(routed), "position"),
        untouched_keys=untouched, event_keys=events, key_groups=key_groups)


def _every_link(opens: DataFrame, messages: DataFrame) -> DataFrame:
    """The links of all the records given (no key group table to start from)."""
    return owner_links(opens).unionByName(started_links(opens, _keys(messages)))


def _new_links(opens, messages, new_messages, new_events, new_hint) -> DataFrame:
    """The links the new records bring: the owners of new opens, the instances new opens
    say a message started, and new messages that started an instance already seen."""
    new_opens = new_events.where(_opened())
    owners = new_opens.select("tenant_id", "element_instance_key").distinct()
    in_started = opens.where(started_message_key("process_instance_key").isNotNull())
    return (owner_links(opens.join(new_hint(owners), ["tenant_id", "element_instance_key"], "left_semi"))
            .unionByName(started_links(new_hint(new_opens), _keys(messages)))
            .unionByName(started_links(in_started, new_hint(_keys(new_messages)))))


def _grown(old_key_groups: DataFrame | None, links: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(the key group rows the links add or change, every key group after them)."""
    none = links.sparkSession.createDataFrame([], KEY_GROUPS)
    key_groups = none if old_key_groups is None else old_key_groups
    links = linking(links).localCheckpoint()
    if links.isEmpty():  # most hourly runs link no two keys: the table stays as it is
        return none, key_groups
    changes = grow_key_groups(key_groups, links).localCheckpoint()
    if changes.isEmpty():  # the keys they link are in one key group already
        return changes, key_groups
    return changes, updated_key_groups(key_groups, changes).localCheckpoint()


def _scope(key_groups: DataFrame, touched: DataFrame) -> DataFrame:
    """(tenant_id, correlation_key, label) of every key of the touched key groups (a key in
    no key group yet is its own)."""
    return (key_groups.join(broadcast_if_small(touched)(touched), ["tenant_id", "label"], "left_semi")
            .unionByName(touched.select("tenant_id", F.col("label").alias("correlation_key"), "label"))
            .distinct().localCheckpoint())


def _touched(new_messages, new_events, messages, opens, key_groups, deployments, new_hint) -> DataFrame:
    """(tenant_id, label) of every key group the new records can change: their keys' key groups,
    the key groups of the subscriptions (and start messages) new workflow events act on, and, for
    new deployments, the key groups of messages named by the process's start events, old or new.
    `new_hint`: the hint for frames of the new records, joined with the history."""
    acting = new_events.where(~_deployed())
    near = (opens.join(new_hint(acting.select("tenant_id", "element_instance_key").distinct()),
                       ["tenant_id", "element_instance_key"], "left_semi")
            .unionByName(opens.join(new_hint(acting.select("tenant_id", "process_instance_key").distinct()),
                                    ["tenant_id", "process_instance_key"], "left_semi")))
    starters = acting.select("tenant_id", started_message_key("process_instance_key").alias("position"))
    started = messages.join(new_hint(starters.where(F.col("position").isNotNull())), ["tenant_id", "position"],
                            "left_semi")
    touched = (with_label(new_messages.select(*SCOPE), key_groups).select("tenant_id", "label")
               .unionByName(route_workflow_events(acting, with_label(near, key_groups),
                                                  with_label(_keys(started), key_groups)).select("tenant_id", "label")))
    if deployments is not None:
        deployed = new_events.where(_deployed()).select("tenant_id", "bpmn_process_id")
        names = (deployments.join(deployed, ["tenant_id", "bpmn_process_id"], "left_semi")
                 .select("tenant_id", F.explode("message_start_events").alias("name")))
        named = messages.join(new_hint(names), ["tenant_id", "name"], "left_semi").select(*SCOPE)
        touched = touched.unionByName(with_label(named, key_groups).select("tenant_id", "label"))
    return touched.distinct()
