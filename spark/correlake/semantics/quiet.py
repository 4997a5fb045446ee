"""Quiet points (rule 4, incremental): where a key group's replay may start without changing a result.

A *quiet point* of a key group is an instant `t_q` across which nothing of it lives: every
entity (a message, an element instance, a process instance) has all its life either
before `t_q` or at/after it. A message lives from its publish to its deadline (rule 6; its
instant when TTL 0 or rejected, rule 7); an element or process instance from its first
to its last record, its subscriptions' open spans (an open one: for ever) and, for a
message-started instance, its run (rules 19-21; running: for ever). What the engine decides
at or after `t_q` then depends only on the records at or after it (and the tenant's
deployments, given whole): the rows that derive from those records (`SINCE_COLUMNS`) are
those of a replay of them alone, and the rows before `t_q` stay as they are.

The spans of one key group merge into clusters (spans that touch merge too); the start of
the last one, `since`, is its last quiet point, found with the end of that cluster, `until`,
from the group's records before a run and gold's rows of them (`last_cluster`). A run may
then replay the key group from `since` (`replay_from`) when its new records are at or after
it and no entity has records on both sides (from the first new record if all are after
`until`).
"""

from __future__ import annotations

from collections.abc import Iterable

from correlake.semantics.buffer import deadline
from correlake.semantics.order import MESSAGE_PUBLISHED, PROCESS_DEPLOYED
from correlake.semantics.start_events import started_message_key

# The column of each restated table whose time says whether a row derives from records at
# or after a quiet point (a correlation's message, an instance's start message: at/after it too).
SINCE_COLUMNS = {"silver_messages": "published_at", "messages": "published_at",
                 "correlations": "message_published_at", "subscriptions": "opened_at",
                 "message_started_instances": "started_at"}


def entities(record: dict) -> set[tuple]:
    """The entities an engine record (keys `kind`, `tenant_id`, `position`, and a workflow
    event's instance keys) names; a message-started instance's key names its message too."""
    tenant = record["tenant_id"]
    if record["kind"] == MESSAGE_PUBLISHED:
        return {("m", tenant, record["position"])}
    return _instance_entities(tenant, record.get("element_instance_key"), record.get("process_instance_key"))


def _instance_entities(tenant: str, element: str | None, instance: str | None) -> set[tuple]:
    found = set()
    if element is not None:
        found.add(("e", tenant, element))
    if instance is not None:
        found.add(("p", tenant, instance))
        if (message := started_message_key(instance)) is not None:
            found.add(("m", tenant, message))
    return found


def _life(record: dict) -> tuple[int, int]:
    """A record's own span: a message's buffer window (rule 6), else its instant."""
    t = record["t"]
    if record["kind"] == MESSAGE_PUBLISHED and record["accepted"] and record["ttl_ms"] > 0:
        return t, deadline(t, record["ttl_ms"])
    return t, t


def spans(records: Iterable[dict], subscriptions: Iterable[dict] = (),
          instances: Iterable[dict] = ()) -> list[tuple[int, float]]:
    """Each entity's span (lo, hi; hi `inf`: alive) over a key group's engine records and the
    engine's rows of it (gold/subscriptions' and gold/message_started_instances', times in
    millis). Deployments name no entity (the engine is given them whole)."""
    found: dict[tuple, list] = {}

    def add(names: set[tuple], lo: int, hi: float) -> None:
        for name in names:
            span = found.setdefault(name, [lo, hi])
            span[0], span[1] = min(span[0], lo), max(span[1], hi)

    for r in records:
        if r["kind"] != PROCESS_DEPLOYED:
            add(entities(r), *_life(r))
    for s in subscriptions:
        add(_instance_entities(s["tenant_id"], s["element_instance_key"], s["process_instance_key"]),
            s["opened_at"], float("inf") if s["closed_at"] is None else s["closed_at"])
    for i in instances:
        add(_instance_entities(i["tenant_id"], None, i["process_instance_key"]),
            i["started_at"], float("inf") if i["ended_at"] is None else i["ended_at"])
    return [(lo, hi) for lo, hi in found.values()]


def last_cluster(records: Iterable[dict], subscriptions: Iterable[dict] = (),
                 instances: Iterable[dict] = ()) -> tuple[int, int | None] | None:
    """(since, until) of the key group's last cluster of spans (`spans`): its last quiet point
    and the end of the last cluster (None: something still lives); None for no records."""
    last = None
    for lo, hi in sorted(spans(records, subscriptions, instances)):
        if last is None or lo > last[1]:
            last = [lo, hi]
        else:
            last[1] = max(last[1], hi)
    if last is None:
        return None
    return last[0], None if last[1] == float("inf") else int(last[1])


def replay_from(before: tuple[int, int | None] | None, records: Iterable[dict]) -> int | None:
    """Where a run replays a key group from: None, from its first record, unless the group had a
    last cluster (since, until) `before` the run and every one of the run's new records (`new` true) is
    at or after `since` (else a late record, rule 4); then from the first new record if all are
    after `until` (a cluster of their own), else from `since`: the first of those points that no
    entity has records on both sides of (an earlier record now routed to the group, or naming
    what a new one names: an element left, an instance ended, an end held before its start).
    `records`: the group's engine records, history's and new, with `new`."""
    if before is None:
        return None
    records = list(records)
    since, until = before
    first = min((r["t"] for r in records if r["new"]), default=since)
    if first < since:
        return None
    lives: dict[tuple, list[int]] = {}  # each entity's first and last record
    for r in records:
        for name in entities(r):
            life = lives.setdefault(name, [r["t"], r["t"]])
            life[0], life[1] = min(life[0], r["t"]), max(life[1], r["t"])
    for point in ([first] if until is not None and first > until else []) + [since]:
        if not any(lo < point <= hi for lo, hi in lives.values()):
            return point
    return None
