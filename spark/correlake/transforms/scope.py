"""What a run recomputes, as Spark's rules: the key groups its new records touch, and their records.

The key groups (`key_groups.py`) are kept in `silver/key_groups` and grown from the links
the new records bring. History comes from silver (`silver/messages`,
`silver/workflow_events`): its key columns (`HistoryKeys`) are joined with the new
records' to find the links, the touched key groups and the events that reach them, so the
costly work (rule 7, the engine, the restating MERGEs) is done for the touched key groups
only. With no key group table yet (a first run, a rebuild, a lake from before it existed),
every link of the records given is used. The Spark backend applies these rules, with its
checkpoints and join hints (`run/backends/spark_scope.recompute`); their twins over Python
sets, the driver backend's, are `run/backends/driver_scope.plan`'s. `hint`
parameters take the caller's join hint for the run's frames, which meet the history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.contract.enums import PROCESS_DEPLOYED, SUBSCRIPTION_OPENED
from correlake.contract.schemas import MESSAGE_FIELDS, SCOPE
from correlake.transforms.key_groups import (
    owner_links,
    route_workflow_events,
    started_links,
    started_message_key,
    with_label,
)

Hint = Callable[[DataFrame], DataFrame]  # a join hint (or none) for a frame of the run's

EVENT_KEYS = ["position", "tenant_id", "type", "process_instance_key", "element_instance_key", "correlation_key"]
MESSAGE_KEYS = ["position", *SCOPE, "name"]


def opened():
    return F.col("type") == SUBSCRIPTION_OPENED


def deployed():
    return F.col("type") == PROCESS_DEPLOYED


@dataclass(frozen=True)
class HistoryKeys:
    """The key columns of silver: of its messages (MESSAGE_KEYS), of its workflow events
    (EVENT_KEYS), and its key group table (None: the lake has none yet)."""
    messages: DataFrame
    events: DataFrame
    key_groups: DataFrame | None

    @classmethod
    def read(cls, old_messages: DataFrame, old_events: DataFrame, old_key_groups: DataFrame | None) -> HistoryKeys:
        """The key columns of silver's message records and workflow events, and the key group table."""
        return cls(old_messages.select(*MESSAGE_KEYS), old_events.select(*EVENT_KEYS), old_key_groups)


def message_records(silver_messages: DataFrame) -> DataFrame:
    """Silver messages back in the shape of distinct bronze records."""
    return silver_messages.select(F.col("message_key").alias("position"), *MESSAGE_FIELDS[1:])


def message_keys(messages: DataFrame) -> DataFrame:
    """Message records' key columns with the position as `message_key` (as `started_links` joins them)."""
    return messages.select("tenant_id", F.col("position").alias("message_key"), "correlation_key", "name")


def union(new: DataFrame, old: DataFrame | None) -> DataFrame:
    return new if old is None else old.unionByName(new)


def every_link(opens: DataFrame, messages: DataFrame) -> DataFrame:
    """The links of all the records given (no key group table to start from)."""
    return owner_links(opens).unionByName(started_links(opens, message_keys(messages)))


def new_links(opens: DataFrame, messages: DataFrame, new_messages: DataFrame, new_events: DataFrame,
              new_hint: Hint) -> DataFrame:
    """The links the new records bring: the owners of new opens, the instances new opens
    say a message started, and new messages that started an instance already seen."""
    new_opens = new_events.where(opened())
    owners = new_opens.select("tenant_id", "element_instance_key").distinct()
    in_started = opens.where(started_message_key("process_instance_key").isNotNull())
    return (owner_links(opens.join(new_hint(owners), ["tenant_id", "element_instance_key"], "left_semi"))
            .unionByName(started_links(new_hint(new_opens), message_keys(messages)))
            .unionByName(started_links(in_started, new_hint(message_keys(new_messages)))))


def scope_keys(key_groups: DataFrame, touched: DataFrame) -> DataFrame:
    """(tenant_id, correlation_key, label) of every key of the `touched` (tenant_id, label) key
    groups (a key in no key group yet is its own)."""
    return (key_groups.join(touched, ["tenant_id", "label"], "left_semi")
            .unionByName(touched.select("tenant_id", F.col("label").alias("correlation_key"), "label"))
            .distinct())


def touched_groups(new_messages: DataFrame, new_events: DataFrame, messages: DataFrame, opens: DataFrame,
            key_groups: DataFrame, deployments: DataFrame | None, new_hint: Hint) -> DataFrame:
    """(tenant_id, label) of every key group the new records can change: their keys' key groups,
    the key groups of the subscriptions (and start messages) new workflow events act on, and, for
    new deployments, the key groups of messages named by the process's start events, old or new.
    `new_hint`: the hint for frames of the new records, joined with the history."""
    acting = new_events.where(~deployed())
    near = (opens.join(new_hint(acting.select("tenant_id", "element_instance_key").distinct()),
                       ["tenant_id", "element_instance_key"], "left_semi")
            .unionByName(opens.join(new_hint(acting.select("tenant_id", "process_instance_key").distinct()),
                                    ["tenant_id", "process_instance_key"], "left_semi")))
    starters = acting.select("tenant_id", started_message_key("process_instance_key").alias("position"))
    started = messages.join(new_hint(starters.where(F.col("position").isNotNull())), ["tenant_id", "position"],
                            "left_semi")
    routed = route_workflow_events(acting, with_label(near, key_groups), with_label(message_keys(started), key_groups))
    touched = (with_label(new_messages.select(*SCOPE), key_groups).select("tenant_id", "label")
               .unionByName(routed.select("tenant_id", "label")))
    if deployments is not None:
        deploying = new_events.where(deployed()).select("tenant_id", "bpmn_process_id")
        names = (deployments.join(deploying, ["tenant_id", "bpmn_process_id"], "left_semi")
                 .select("tenant_id", F.explode("message_start_events").alias("name")))
        named = messages.join(new_hint(names), ["tenant_id", "name"], "left_semi").select(*SCOPE)
        touched = touched.unionByName(with_label(named, key_groups).select("tenant_id", "label"))
    return touched.distinct()
