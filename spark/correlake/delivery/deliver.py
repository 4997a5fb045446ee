"""`correlake deliver`'s pass: the outbox's events as the last finished run published them,
to a sink, each ordering key's events in sequence order (docs/delivery.md).

A pass holds `<lake>/_state/delivery.lock` (a second pass at the same time sends nothing)
and works in batches: the due chains of the ordering keys (each key's head and the events
behind it, `Ledger.due`), at most DELIVERY_BATCH_EVENTS events and DELIVERY_BATCH_SECONDS
of sending, go to the sink (the partitions at once, each key's events in order); then the
batch's outcomes and the next batch's SENT marks are recorded in one MERGE of
`delivery/state` and one append to `delivery/attempts`. A pass killed mid-batch sends
that batch's events again the next time: delivery is at least once, consumers deduplicate
by `event_id`. No Spark: delta-rs reads and writes the tables."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from correlake import config, progress
from correlake.contract.ordering import ordering_key
from correlake.delivery import tables
from correlake.delivery.events import (
    ACK,
    AWAITED,
    DEAD_LETTERS,
    FINAL,
    HELD,
    PENDING,
    STATUSES,
    Event,
    Sink,
    partition_of,
)
from correlake.delivery.ledger import REQUEUED, Ledger, Policy, Tracked, clocks
from correlake.errors import EXIT_OK, CorrelakeError
from correlake.lake import journal
from correlake.lake.files import state
from correlake.lake.lock import LakeBusy, held, lock_path

OPEN = tuple(s for s in STATUSES if s not in FINAL)
DELIVERY_LOCK, MARKS = "delivery.lock", "delivery.json"  # in the lake's _state
ORDERING_REVISION = 3  # the contract revision whose ordering keys a pass routes by (marked in MARKS)


class DeliveryBusy(CorrelakeError):
    """Another delivery pass holds the lake's delivery lock: that pass delivers, nothing is wrong."""

    exit_code, retryable = EXIT_OK, True


@dataclass(frozen=True)
class Requeue:
    """`--requeue-dead-letters`: every dead letter, or one event's, or one message's."""
    event_id: str | None = None
    message_key: int | None = None


@dataclass(frozen=True)
class Settings:
    partitions: int = config.DELIVERY_PARTITIONS
    max_seconds: float = config.DELIVERY_MAX_SECONDS
    ttl_seconds: float = config.DELIVERY_TTL_SECONDS
    retry_base: float = config.DELIVERY_RETRY_BASE_SECONDS
    retry_cap: float = config.DELIVERY_RETRY_CAP_SECONDS
    requeue: Requeue | None = None


@dataclass
class PassResult:
    statuses: Counter = field(default_factory=Counter)  # every event's, after the pass
    tally: Counter = field(default_factory=Counter)  # this pass's events sent, attempts, acked, retried,
    # dead_letters, requeued
    last_error: str | None = None  # this pass's last answer that was not an acknowledgement
    batches: int = 0
    outbox_version: int | None = None
    seconds: float = 0.0
    note: str | None = None  # why the pass sent nothing, if it is not that nothing was due
    waiting: int = 0  # the events not final after the pass
    waiting_since: datetime | None = None  # since when the longest of them waits (`Tracked.since`)


def now() -> datetime:
    return datetime.now(timezone.utc)


def deliver(lake: str, sink: Sink, settings: Settings) -> PassResult:
    """One pass (raises DeliveryBusy when another holds the lock)."""
    started = time.monotonic()
    try:
        with held(lake, DELIVERY_LOCK):
            result = _pass(lake, sink, settings, started)
    except LakeBusy:
        raise DeliveryBusy(f"another delivery pass holds {lock_path(lake, DELIVERY_LOCK)}; "
                           "this one sent nothing") from None
    result.seconds = time.monotonic() - started
    return result


def _pass(lake: str, sink: Sink, settings: Settings, started: float) -> PassResult:
    result = PassResult(outbox_version=journal.published_version(lake, "outbox"))
    if result.outbox_version is None:
        result.note = "nothing to deliver yet: no run has published the outbox"
    if result.outbox_version is None or not _partitions_usable(lake, sink, settings.partitions, result):
        result.statuses = _counts(lake)
        return result
    sink.prepare(settings.partitions)
    outbox = tables.Outbox(lake, result.outbox_version)
    ledger = _load(lake, outbox, result.outbox_version, settings)
    result.tally, result.statuses = ledger.tally, ledger.counts
    while True:
        moment = now()
        ledger.expire(moment)
        in_time = time.monotonic() - started < settings.max_seconds
        batch = ledger.due(moment, config.DELIVERY_BATCH_EVENTS) if in_time else []
        if not batch:
            wake = ledger.next_wake()
            wait = None if wake is None else (wake - moment).total_seconds()
            if not in_time or wait is None or time.monotonic() - started + wait >= settings.max_seconds:
                break
            _record(lake, ledger, moment)
            time.sleep(max(wait, 0.0))
            continue
        ledger.mark_sent(batch)
        _record(lake, ledger, moment)
        sending = time.monotonic()
        outcomes = sink.send(_events(outbox, batch, settings.partitions),
                             until=sending + config.DELIVERY_BATCH_SECONDS)
        ledger.record(batch, outcomes, now())
        result.batches += 1
        verdicts = Counter(o.verdict for o in outcomes)
        progress.step(f"deliver: batch {result.batches}: {len(batch) - verdicts[HELD]} events sent, {verdicts[ACK]} "
                      f"acknowledged, in {time.monotonic() - sending:.1f} s")
    _record(lake, ledger, now())
    tables.compact(lake)
    result.last_error = ledger.last_error
    result.waiting, result.waiting_since = ledger.waiting()
    return result


def _partitions_usable(lake: str, sink: Sink, partitions: int, result: PassResult) -> bool:
    """Whether this pass may route by `partitions`: the same N and ordering keys as the last
    pass, or a sink that holds no event the old routing sent (a pass before contract
    revision 3 routed every empty-key event of a tenant by one key). Records the routing
    before anything is sent by it."""
    marks = _marks(lake)
    old = marks.get("partitions")
    changed = old not in (None, partitions) or (old is not None and marks.get("ordering") != ORDERING_REVISION)
    if changed and not sink.drained(old):
        result.note = (f"the last pass routed by {old} partitions"
                       + ("" if marks.get("ordering") == ORDERING_REVISION else " and the ordering keys of revision 2")
                       + f" and the sink still holds events of them: nothing was sent (run again once they are "
                       f"consumed{'' if old == partitions else f', or with --partitions {old}'})")
        return False
    if old != partitions or marks.get("ordering") != ORDERING_REVISION:
        _mark(lake, partitions=partitions, ordering=ORDERING_REVISION)
    return True


def _marks(lake: str) -> dict:
    """`_state/delivery.json`: the last pass's `partitions` and `ordering` (revision);
    `registering`, a registration begun and not finished; `registered`, the outbox version
    whose events all have their `delivery/state` rows (and that table's id)."""
    try:
        marks = json.loads(state(lake).read(MARKS) or "{}")
    except (OSError, ValueError):
        return {}
    return marks if isinstance(marks, dict) else {}


def _mark(lake: str, **values) -> None:
    state(lake).write(MARKS, json.dumps(_marks(lake) | values))


def _record(lake: str, ledger: Ledger, moment: datetime) -> None:
    state, attempts = ledger.flush(moment)
    tables.append_attempts(lake, attempts)
    tables.merge_state(lake, state)


def _load(lake: str, outbox: tables.Outbox, version: int, settings: Settings) -> Ledger:
    """The ledger of the outbox's non-final events. New events get their PENDING rows (the
    outbox version registered last needs no look for them); dead letters to requeue become
    PENDING again, with a REQUEUED attempt. Reads only what is not final (and the statuses)."""
    moment = now()
    policy = Policy(settings.ttl_seconds, settings.retry_base, settings.retry_cap)
    counts = _counts(lake)
    open_rows = {row["event_id"]: row for row in tables.read_state(lake, statuses=OPEN).to_pylist()}
    new = pa.array([], pa.string())
    if _marks(lake).get("registered") != _registration(lake, version):
        new = _unregistered(lake, outbox)
        _mark(lake, registering=True)
        tables.append_state(lake, [_pending(event_id, moment) for event_id in new.to_pylist()])
        _mark(lake, registered=_registration(lake, version), registering=False)
        counts[PENDING] += len(new)
    dead = tables.read_state(lake, statuses=DEAD_LETTERS) if settings.requeue else None
    wanted = [new, pa.array(list(open_rows), pa.string())] + ([dead["event_id"].combine_chunks()] if dead else [])
    if not sum(map(len, wanted)):
        return Ledger([], counts, policy)  # nothing to send: the outbox need not be read
    keys = outbox.keys(pa.concat_arrays(wanted))
    requeued = _requeue(lake, dead, keys, settings.requeue, moment) if dead else []
    for row in requeued:
        counts[row.pop("_was")] -= 1
        counts[PENDING] += 1
        open_rows[row["event_id"]] = row
    started = clocks(tables.read_attempts(lake, OPEN).to_pylist())
    new_ids, events = set(new.to_pylist()), []
    for row in keys.to_pylist():
        if (st := open_rows.get(row["event_id"])) is None and row["event_id"] not in new_ids:
            continue  # a dead letter not requeued
        st = st or {}
        line = (row["tenant_id"], ordering_key(row["correlation_key"], row["message_key"]))
        events.append(Tracked(row["event_id"], line, row["message_key"],
                              row["sequence"], row["file"], st.get("status", PENDING), st.get("attempts", 0),
                              st.get("next_attempt_at"), st.get("last_error"), started.get(row["event_id"]),
                              seen=st.get("updated_at", moment) if st.get("status", PENDING) == PENDING else None))
    ledger = Ledger(events, counts, policy)
    ledger.tally["requeued"] = len(requeued)
    return ledger


def _unregistered(lake: str, outbox: tables.Outbox) -> pa.Array:
    """The ids of the outbox's events that have no `delivery/state` row yet. Those of the
    files added since the version registered last, when the state table is the same and
    no registration was cut short (what a pass reads follows what runs added); else
    every id of the outbox, less those of the state table."""
    marks, state_table = _marks(lake), tables.table_id(lake, "delivery_state")
    last = marks.get("registered") or {}
    if last.get("state_table") == state_table and state_table and not marks.get("registering"):
        added = outbox.ids(since=last["outbox_version"])
        if added is not None:
            return added.combine_chunks()
    ids = outbox.ids()
    known = tables.read_state(lake, ["event_id"])["event_id"]
    return ids.filter(pc.invert(pc.is_in(ids, value_set=known))).combine_chunks()


def _registration(lake: str, version: int) -> dict:
    return {"outbox_version": version, "state_table": tables.table_id(lake, "delivery_state")}


def _counts(lake: str) -> Counter:
    counts = Counter(dict.fromkeys(STATUSES, 0))
    counts.update(tables.status_counts(lake))
    return counts


def _pending(event_id: str, moment: datetime) -> dict:
    return {"event_id": event_id, "status": PENDING, "attempts": 0, "next_attempt_at": None,
            "last_error": None, "updated_at": moment}


def _requeue(lake: str, dead: pa.Table, keys: pa.Table, requeue: Requeue, moment: datetime) -> list[dict]:
    """The dead letters `requeue` names back to PENDING (their attempts go on counting; the
    ttl counts again from their next attempt): their new rows, each with `_was`, its old status."""
    chosen = pa.repeat(True, dead.num_rows)
    if requeue.event_id is not None:
        chosen = pc.equal(dead["event_id"], requeue.event_id)
    if requeue.message_key is not None:
        group = keys["event_id"].filter(pc.equal(keys["message_key"], requeue.message_key))
        chosen = pc.is_in(dead["event_id"], value_set=group)
    rows = dead.filter(chosen).to_pylist()
    tables.merge_state(lake, [_pending(r["event_id"], moment) | {"attempts": r["attempts"]} for r in rows])
    tables.append_attempts(lake, [{"event_id": r["event_id"], "attempt": r["attempts"], "at": moment,
                                   "outcome": REQUEUED, "detail": f"was {r['status']}: {r['last_error']}"}
                                  for r in rows])
    return [_pending(r["event_id"], moment) | {"attempts": r["attempts"], "_was": r["status"]} for r in rows]


def _events(outbox: tables.Outbox, heads: list[Tracked], partitions: int) -> list[Event]:
    by_file: dict[int, list[str]] = {}
    for head in heads:
        by_file.setdefault(head.file, []).append(head.event_id)
    rows = outbox.bodies(by_file)
    events = []
    for head in heads:
        (tenant_id, line), row = head.key, rows[head.event_id]
        partition = partition_of(tenant_id, line, partitions)
        events.append(Event(head.event_id, row["kind"], tenant_id, row["correlation_key"], line, head.message_key,
                            head.sequence, partition, _body(row["payload"], line, partition)))
    return events


def _body(payload: str, line: str, partition: int) -> bytes:
    """The event's JSON as the outbox holds it, its `partition` the one this pass routes by;
    an event written before contract revision 3 gets its `ordering_key` after its `kind`."""
    event = json.loads(payload)
    if event.get("partition") == partition and "ordering_key" in event:
        return payload.encode()
    if "ordering_key" not in event:
        head = {k: event.pop(k) for k in ("event_id", "kind") if k in event}
        event = head | {"ordering_key": line} | event
    event["partition"] = partition
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def tallied(result: PassResult) -> str:
    """What this pass did, counted in events (a retried event is sent once, in several attempts)."""
    tally = result.tally
    return (f"this pass: {tally['sent']} events sent in {tally['attempts']} attempts ({tally['retried']} answered "
            f"with a retry), {tally['acked']} acknowledged, {tally['dead_letters']} dead letters")


def summary(result: PassResult) -> str:
    tally = result.tally
    lines = [f"correlake deliver: outbox version {result.outbox_version}, {result.batches} batches "
             f"in {result.seconds:.1f} s"]
    if result.note:
        lines.append(result.note)
    lines.append(tallied(result) + (f", {tally['requeued']} requeued" if tally['requeued'] else ""))
    if result.last_error:
        lines.append(f"last error: {result.last_error}; {result.statuses[AWAITED]} events wait for a retry")
    if result.waiting:
        since = result.waiting_since
        lines.append(f"{result.waiting} events wait for a later pass" + ("" if since is None else
                     f", the longest since {since:%Y-%m-%dT%H:%M:%SZ} ({(now() - since).total_seconds():.0f} s)"))
    lines.append("events by status: " + ", ".join(f"{s} {result.statuses[s]}" for s in STATUSES))
    return "\n".join(lines)
