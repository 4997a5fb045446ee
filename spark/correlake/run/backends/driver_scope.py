"""The driver backend's scope: the key groups a run's new records touch, their keys,
message records and routed events, worked out in this process from delta-rs lookups in the
run's snapshot of silver (files skipped by their statistics where they can be), not
through Spark's joins with silver's key columns.

These are the twins, over Python sets of the rows a run on the driver touches, of the rules of
`transforms/scope.py` and `transforms/key_groups.py` that the Spark backend applies
(`spark_scope.recompute`); each function names its twin. The property test compares both
backends' scopes of every run on the driver backend, and the backends' contract test their outputs.
`plan` raises TooLargeForDriver past its room (then the Spark backend plans the run).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame

from correlake.config import DRIVER_HISTORY_ROOMS
from correlake.contract.enums import ELEMENT_LEFT, INSTANCE_ENDED, PROCESS_DEPLOYED, SUBSCRIPTION_OPENED
from correlake.contract.schemas import MESSAGE_FIELDS
from correlake.lake import deltars
from correlake.run.backends import replay
from correlake.run.backends.base import TooLargeForDriver
from correlake.run.backends.replay import GOLD_COLUMNS
from correlake.semantics.start_events import START_PREFIX, started_message_key
from correlake.transforms.key_groups import smallest_roots
from correlake.transforms.scope import EVENT_KEYS, MESSAGE_KEYS

if TYPE_CHECKING:
    from correlake.run.backends.base import Run


class EventKeys(NamedTuple):
    """A workflow event's key columns (EVENT_KEYS)."""
    position: int
    tenant_id: str
    type: str
    process_instance_key: str | None
    element_instance_key: str | None
    correlation_key: str | None


class MessageKeys(NamedTuple):
    """A message record's key columns (MESSAGE_KEYS)."""
    position: int
    tenant_id: str
    correlation_key: str
    name: str


SILVER_MESSAGE_KEYS = ["message_key", *MESSAGE_KEYS[1:]]  # silver's name of a message's position


@dataclass
class DriverScope:
    """A run's work on the driver backend: the key group rows it adds or changes and the touched key groups'
    keys (tenant_id, correlation_key, label); their message records (the run's new ones
    and silver's) and routed workflow events."""
    key_group_changes: list[tuple[str, str, str]]
    scope: list[tuple[str, str, str]]
    message_records: pa.Table
    routed_events: pa.Table  # the new and silver's events (WORKFLOW_FIELDS) that reach them, with their `label`
    touched: list[tuple[str, str, str, int | None]]  # `scope` with each key group's replay point (`replay.py`)

    @property
    def touched_groups(self) -> int:
        return len({(tenant, label) for tenant, _, label in self.scope})


class _Silver:
    """Silver's rows in the run's snapshot, looked up by delta-rs (none before a first run),
    with the run's new records: what the Spark backend joins with silver's key columns."""

    def __init__(self, run: Run, history: bool, messages: list[MessageKeys], events: list[EventKeys]):
        def table(name):
            return deltars.table(run.lake_dir, name, run.plan.versions[name]) if history else None
        self.messages_table, self.events_table = table("silver_messages"), table("silver_workflow_events")
        self.key_groups_table = table("key_groups")
        self.new_messages, self.new_events = messages, events
        self._labels: dict[tuple[str, str], str] = {}

    @staticmethod
    def _rows(table, columns: list[str], where: str, kind) -> list:
        found = deltars.select(table, columns, where)
        return [] if found is None else [kind(*row) for row in deltars.tuples(found)]

    def events(self, column: str, pairs: set[tuple[str, object]], type_: str | None = None) -> list[EventKeys]:
        """The events (silver's and new) of a tenant whose `column` is one of `pairs`' (tenant, value)."""
        if not (values := {v for _, v in pairs if v is not None}):
            return []
        where = f'"{column}" IN ({deltars.listed(sorted(values))})' + (f" AND type = '{type_}'" if type_ else "")
        found = self._rows(self.events_table, EVENT_KEYS, where, EventKeys) + self.new_events
        return [e for e in found if (e.tenant_id, getattr(e, column)) in pairs and (type_ is None or e.type == type_)]

    @cached_property
    def started_events(self) -> list[EventKeys]:
        """The opens and ends (silver's and new) of the instances messages started (rule 20)."""
        where = (f"type IN ('{SUBSCRIPTION_OPENED}', '{INSTANCE_ENDED}') "
                 f"AND starts_with(process_instance_key, '{START_PREFIX}')")
        return [e for e in self._rows(self.events_table, EVENT_KEYS, where, EventKeys) + self.new_events
                if e.type in (SUBSCRIPTION_OPENED, INSTANCE_ENDED) and started_message_key(e.process_instance_key)
                is not None]

    def messages(self, column: str, pairs: set[tuple[str, object]]) -> list[MessageKeys]:
        """The message records (silver's and new) of a tenant whose `column` is one of `pairs`'."""
        if not (values := {v for _, v in pairs if v is not None}):
            return []
        silver_column = "message_key" if column == "position" else column
        where = f'"{silver_column}" IN ({deltars.listed(sorted(values))})'
        found = self._rows(self.messages_table, SILVER_MESSAGE_KEYS, where, MessageKeys) + self.new_messages
        return [m for m in found if (m.tenant_id, getattr(m, column)) in pairs]

    def key_group_rows(self, column: str, pairs: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
        """Rows (tenant_id, correlation_key, label) of the key group table, `column` one of `pairs`'."""
        if not (values := {v for _, v in pairs}):
            return []
        where = f'"{column}" IN ({deltars.listed(sorted(values))})'
        index = {"correlation_key": 1, "label": 2}[column]
        return [r for r in self._rows(self.key_groups_table, ["tenant_id", "correlation_key", "label"], where,
                                      lambda *row: row)
                if (r[0], r[index]) in pairs]

    def labels(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The key group of each of `keys` before the run (a key in none is its own)."""
        keys = set(keys)
        if missing := keys - self._labels.keys():
            self._labels |= {key: key[1] for key in missing}
            self._labels |= {(t, k): label for t, k, label in self.key_group_rows("correlation_key", missing)}
        return {key: self._labels[key] for key in keys}


def _owner_links(opens: Iterable[EventKeys]) -> set[tuple[str, str, str]]:
    """(tenant_id, a, b): keys of subscriptions with one owner element instance (`key_groups.owner_links`)."""
    by_owner = defaultdict(set)
    for e in opens:
        if e.element_instance_key is not None and e.correlation_key is not None:
            by_owner[(e.tenant_id, e.element_instance_key)].add(e.correlation_key)
    return {(tenant, min(keys), b) for (tenant, _), keys in by_owner.items() if len(keys) > 1 for b in keys}


def _started_links(opens: Iterable[EventKeys], messages: Iterable[MessageKeys]) -> set[tuple[str, str, str]]:
    """(tenant_id, a, b): a subscription's key and its instance's start message's key (`key_groups.started_links`)."""
    keys = {(m.tenant_id, m.position): m.correlation_key for m in messages}
    return {(e.tenant_id, e.correlation_key, b) for e in opens if e.correlation_key is not None
            and (b := keys.get((e.tenant_id, started_message_key(e.process_instance_key)))) is not None}


def _key_group_changes(silver: _Silver, links: set[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The key group rows `links` add or change (`key_groups.grow_key_groups`): every key group
    a link touches joins the key group of the smallest label among them."""
    links = {(t, a, b) for t, a, b in links if a != b}
    labels = silver.labels({(t, k) for t, a, b in links for k in (a, b)})
    merged = [(t, la, lb) for t, a, b in links if (la := labels[(t, a)]) != (lb := labels[(t, b)])]
    moved = [(t, node, root) for t, node, root in smallest_roots(merged) if node != root]
    root_of = {(t, node): root for t, node, root in moved}
    members = silver.key_group_rows("label", set(root_of))
    return moved + [(t, key, root_of[(t, label)]) for t, key, label in members]


def _route(events: Iterable[EventKeys], opens: dict[int, str], owners: dict, instances: dict, starts: dict
           ) -> set[tuple[int, str, str]]:
    """(position, tenant_id, label) of the key groups each event acts on (`key_groups.route_workflow_events`):
    `opens` the label of each labelled open's position; `owners`, `instances` the labels of
    their subscriptions by (tenant, element or process instance); `starts` by (tenant, message position)."""
    routed = set()
    for e in events:
        if e.type == SUBSCRIPTION_OPENED and e.position in opens:
            labels = {opens[e.position]}
        elif e.type == ELEMENT_LEFT and e.element_instance_key is not None:
            labels = owners.get((e.tenant_id, e.element_instance_key), set())
        elif e.type == INSTANCE_ENDED and e.process_instance_key is not None:
            labels = instances.get((e.tenant_id, e.process_instance_key), set()) | starts.get(
                (e.tenant_id, started_message_key(e.process_instance_key)), set())
        else:
            labels = set()
        routed |= {(e.position, e.tenant_id, label) for label in labels}
    return routed


def _route_lookups(opens: Iterable[EventKeys], messages: Iterable[MessageKeys], label) -> tuple[dict, dict, dict, dict]:
    """The lookups of `_route` for these opens and messages, labelled by `label(tenant, key)`."""
    by_position, owners, instances, starts = {}, defaultdict(set), defaultdict(set), defaultdict(set)
    for e in opens:
        by_position[e.position] = label(e.tenant_id, e.correlation_key)
        owners[(e.tenant_id, e.element_instance_key)].add(by_position[e.position])
        instances[(e.tenant_id, e.process_instance_key)].add(by_position[e.position])
    for m in messages:
        starts[(m.tenant_id, m.position)].add(label(m.tenant_id, m.correlation_key))
    return by_position, owners, instances, starts


def plan(run: Run, new_messages: DataFrame, new_events: DataFrame, history: bool, redeployed: bool,
         room: int | None) -> DriverScope:
    """The run's scope, planned here: TooLargeForDriver if it holds more than `room` engine
    records (its new records, its touched key groups' keys, their messages and routed
    events from their replay points, `replay.py`; None: no bound). `new_messages`: distinct
    new message records; `new_events`: new silver workflow events; `history`: whether silver's
    tables are read (not a first run, not a rebuild); `redeployed`: whether there are new
    deployments (then no key group is replayed from a quiet point)."""
    new = [_fetched(frame, room) for frame in (new_messages.select(*MESSAGE_FIELDS), new_events)]
    if room is not None and sum(rows.num_rows for rows in new) > room:
        raise TooLargeForDriver(f"more than {room} new records")
    new_messages, new_events = new
    silver = _Silver(run, history, _keys(new_messages, MESSAGE_KEYS, MessageKeys),
                     _keys(new_events, EVENT_KEYS, EventKeys))
    changes, touched = _touched(silver, _deployed_names(run, new_events, history) if redeployed else set())
    scope = _scope(silver, changes, touched)
    if room is not None and len(scope) > room:
        raise TooLargeForDriver(f"more than {room} touched keys")
    records = _message_records(silver, new_messages, {(t, k) for t, k, _ in scope})
    routed = _routed(silver, scope, records)
    if room is not None and len(routed) + records.num_rows > room * DRIVER_HISTORY_ROOMS:
        raise TooLargeForDriver(f"more than {room * DRIVER_HISTORY_ROOMS} records of history")
    events = _routed_events(silver, routed, new_events)
    keys = {(t, k) for t, k, _ in scope}
    gold = None if not history or redeployed else {name: deltars.rows_of_keys(
        deltars.table(run.lake_dir, name, run.plan.versions[name]), columns, keys) for name, columns in GOLD_COLUMNS.items()}
    new = {("m", p) for p in new_messages["position"].to_pylist()} | {
        ("e", p) for p in new_events["position"].to_pylist()}
    since = replay.points(gold, scope, records, events, new)
    records, events = replay.replayed(records, events, scope, since)
    if room is not None and events.num_rows + records.num_rows > room:
        raise TooLargeForDriver(f"more than {room} engine records")
    return DriverScope(changes, scope, records, events, replay.touched(scope, since))


def _keys(rows: pa.Table, columns: list[str], kind: type) -> list:
    """`rows`' `columns`, each row a `kind`."""
    return [kind(*row) for row in deltars.tuples(rows.select(columns))]


def _fetched(frame: DataFrame, room: int | None) -> pa.Table:
    """`frame`'s rows, at most one more than `room`."""
    return (frame if room is None else frame.limit(room + 1)).toArrow()


def _touched(silver: _Silver, named: set[tuple[str, str]]) -> tuple[list[tuple[str, str, str]], set[tuple[str, str]]]:
    """(the key group rows the new records add or change, the (tenant_id, label) of every key
    group they can change): `scope.new_links` and `scope.touched_groups`, or, with no history,
    every link and every key of the records. `named`: (tenant, message name) of the start
    events of new deployments, whose messages' key groups they touch."""
    new_opens = [e for e in silver.new_events if e.type == SUBSCRIPTION_OPENED]
    acting = [e for e in silver.new_events if e.type != PROCESS_DEPLOYED]
    if silver.messages_table is None and silver.events_table is None:  # no history
        changes = _key_group_changes(silver, _owner_links(new_opens) | _started_links(new_opens, silver.new_messages))
        keys = {(r.tenant_id, r.correlation_key) for r in [*silver.new_messages, *new_opens]}
        label = _labels_after(silver, changes, keys)
        return changes, {(t, label[(t, k)]) for t, k in keys}
    links = _owner_links(silver.events("element_instance_key", {(e.tenant_id, e.element_instance_key)
                                                                 for e in new_opens}, SUBSCRIPTION_OPENED))
    links |= _started_links(new_opens, silver.messages("position", {(e.tenant_id, started_message_key(
        e.process_instance_key)) for e in new_opens}))
    links |= _started_links([e for e in silver.started_events if e.type == SUBSCRIPTION_OPENED], silver.new_messages)
    changes = _key_group_changes(silver, links)
    near = (silver.events("element_instance_key", {(e.tenant_id, e.element_instance_key) for e in acting},
                          SUBSCRIPTION_OPENED)
            + silver.events("process_instance_key", {(e.tenant_id, e.process_instance_key) for e in acting},
                            SUBSCRIPTION_OPENED))
    started = silver.messages("position", {(e.tenant_id, started_message_key(e.process_instance_key))
                                           for e in acting})
    messages = [*silver.new_messages, *silver.messages("name", named)]
    label = _labels_after(silver, changes, {(r.tenant_id, r.correlation_key) for r in [*messages, *near, *started]})
    by_key = lambda t, k: label[(t, k)]  # noqa: E731
    touched = {(m.tenant_id, by_key(m.tenant_id, m.correlation_key)) for m in messages}
    return changes, touched | {(t, lb) for _, t, lb in _route(acting, *_route_lookups(near, started, by_key))}


def _labels_after(silver: _Silver, changes: list, keys: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The key group of each of `keys` once `changes` are applied."""
    after = {(t, k): label for t, k, label in changes}
    return {key: after.get(key, label) for key, label in silver.labels(keys).items()}


def _deployed_names(run: Run, new_events: pa.Table, history: bool) -> set[tuple[str, str]]:
    """(tenant_id, name) of the message start events of every deployment, old or new, of the
    processes the run's new records deploy (`scope.touched_groups`)."""
    deployed = [(t, p, names) for t, kind, p, names in deltars.tuples(new_events.select(
        ["tenant_id", "type", "bpmn_process_id", "message_start_events"])) if kind == PROCESS_DEPLOYED]
    processes = {(t, p) for t, p, _ in deployed}
    table = deltars.table(run.lake_dir, "silver_deployments", run.plan.versions["silver_deployments"]) \
        if history else None
    old = deltars.select(table, ["tenant_id", "bpmn_process_id", "message_start_events"],
                         f"bpmn_process_id IN ({deltars.listed(sorted({p for _, p in processes}))})") \
        if processes else None
    old = [] if old is None else deltars.tuples(old)
    return {(t, name) for t, p, names in [*deployed, *old] if (t, p) in processes for name in names or ()}


def _scope(silver: _Silver, changes: list, touched: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(tenant_id, correlation_key, label) of every key of the touched key groups, after the
    changes (a key in no key group is its own): `scope.scope_keys`."""
    changed = {(t, k) for t, k, _ in changes}
    rows = {r for r in silver.key_group_rows("label", touched) if (r[0], r[1]) not in changed}
    rows |= {r for r in changes if (r[0], r[2]) in touched}
    return sorted(rows | {(t, label, label) for t, label in touched})


def _message_records(silver: _Silver, new: pa.Table, keys: set[tuple[str, str]]) -> pa.Table:
    """The touched key groups' message records (MESSAGE_FIELDS): the run's new ones (each of a
    touched key) and silver's of the touched keys."""
    old = deltars.rows_of_keys(silver.messages_table, ["message_key", *MESSAGE_FIELDS[1:]], keys)
    return new if old is None else pa.concat_tables([new, old.rename_columns(MESSAGE_FIELDS).cast(new.schema)])


def _routed(silver: _Silver, scope: list[tuple[str, str, str]], records: pa.Table) -> set[tuple[int, str]]:
    """(position, label) of every workflow event, silver's or new, that acts on a touched key
    group: the opens of its keys, and the ends and leavings of their instances and elements
    and of the instances its messages started (`spark_scope.recompute`'s routing)."""
    label = {(t, k): lb for t, k, lb in scope}
    opens = silver.events("correlation_key", set(label), SUBSCRIPTION_OPENED)
    messages = _keys(records, MESSAGE_KEYS, MessageKeys)
    lookups = _route_lookups(opens, messages, lambda t, k: label[(t, k)])
    _, owners, instances, starts = lookups
    events = [*opens, *silver.events("element_instance_key", set(owners), ELEMENT_LEFT),
              *silver.events("process_instance_key", set(instances), INSTANCE_ENDED),
              *[e for e in silver.started_events if e.type == INSTANCE_ENDED
                and (e.tenant_id, started_message_key(e.process_instance_key)) in starts]]
    return {(position, lb) for position, _, lb in _route(events, *lookups)}


def _routed_events(silver: _Silver, routed: set[tuple[int, str]], new_events: pa.Table) -> pa.Table:
    """The routed workflow events, one row per (event, label) as the Spark backend joins them: of
    the run's new events and silver's, read at the routed positions."""
    positions = {p for p, _ in routed}
    events = new_events.filter(pa.array([p in positions for p in new_events["position"].to_pylist()], pa.bool_()))
    old = deltars.rows_in(silver.events_table, events.schema.names, "position", positions, events.schema)
    events = events if old is None else pa.concat_tables([events, old])
    at = {p: i for i, p in enumerate(events["position"].to_pylist())}
    pairs = sorted(routed)
    rows = events.take(pa.array([at[p] for p, _ in pairs], pa.int64()))
    return rows.append_column("label", pa.array([label for _, label in pairs], pa.string()))
