"""A pass's rules, in memory and without I/O: which events may be sent now (each ordering
key's due chain: its head and the events behind it), and what an outcome, a group's
cancellation or an expiry makes of them.

Every change is kept until `flush` hands it over as rows of `delivery/state` and
`delivery/attempts` (docs/delivery.md)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from correlake.delivery.events import (
    ACK,
    ACKED,
    AWAITED,
    CANCELLED,
    EXPIRED,
    FINAL,
    HELD,
    PENDING,
    REJECT,
    RETRY,
    SENT,
    Outcome,
)

REQUEUED = "REQUEUED"  # delivery/attempts' outcome of `--requeue-dead-letters` (not a send)
SENDS = (ACK, RETRY, REJECT)  # delivery/attempts' outcomes of a send


@dataclass
class Tracked:
    """A non-final event: its place in its key's order, and its state row's fields.
    `clock`: its first attempt since it was (re)queued, from which its ttl counts."""
    event_id: str
    key: tuple[str, str]
    message_key: int
    sequence: int
    file: int
    status: str = PENDING
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    clock: datetime | None = None
    unsent: tuple[str, datetime | None] | None = None  # its status and next attempt before it was marked SENT
    seen: datetime | None = None  # when a pass first saw it (its PENDING row's time)

    @property
    def since(self) -> datetime | None:
        """How long it waits: from its first attempt (since its requeue), or from when a pass first saw it."""
        return self.clock or self.seen

    def row(self, now: datetime) -> dict:
        return {"event_id": self.event_id, "status": self.status, "attempts": self.attempts,
                "next_attempt_at": self.next_attempt_at, "last_error": self.last_error, "updated_at": now}


@dataclass(frozen=True)
class Policy:
    """Retries and expiry: a retry waits uniform(0, min(cap, base * 2^(attempt-1))) seconds."""
    ttl_seconds: float
    retry_base: float
    retry_cap: float
    rng: random.Random = field(default_factory=random.Random)

    def backoff(self, attempt: int) -> timedelta:
        ceiling = min(self.retry_cap, self.retry_base * 2.0 ** min(attempt - 1, 64))
        return timedelta(seconds=self.rng.uniform(0, ceiling))


class Ledger:
    """The non-final events of a pass by ordering key (in sequence order: the first is the
    head, the only one that may be sent), the counts by status of all events, and the
    changes not flushed yet."""

    def __init__(self, events: list[Tracked], counts: Counter, policy: Policy):
        self.policy = policy
        self.counts = counts
        self.by_key: dict[tuple[str, str], list[Tracked]] = {}
        self.groups: dict[int, dict[str, Tracked]] = {}
        for event in sorted(events, key=lambda e: (e.key, e.sequence)):
            self.by_key.setdefault(event.key, []).append(event)
            self.groups.setdefault(event.message_key, {})[event.event_id] = event
        self.changed: dict[str, Tracked] = {}
        self.attempt_rows: list[dict] = []
        self.tally = Counter()  # this pass: events sent, attempts, their outcomes
        self.sent_ids: set[str] = set()
        self.last_error: str | None = None  # this pass's last answer that was not an acknowledgement

    def waiting(self) -> tuple[int, datetime | None]:
        """The events not final, and since when the longest of them waits."""
        events = [e for chain in self.by_key.values() for e in chain]
        return len(events), min((e.since for e in events if e.since is not None), default=None)

    def heads(self) -> list[Tracked]:
        return [events[0] for events in self.by_key.values()]

    def due(self, now: datetime, limit: int) -> list[Tracked]:
        """At most `limit` events that may be sent now: the chains of the keys whose head is
        due (new, sent by a pass that did not record the outcome, or waiting for a retry
        that fell due), each the head and the key's events behind it in sequence order, key
        after key until `limit`; interleaved (every chain's first, then every chain's
        second, …), so that a long chain does not hold the keys that share its lane."""
        chains, taken = [], 0
        for events in self.by_key.values():
            if taken >= limit:
                break
            if self._due(events[0], now):
                chains.append(events[:limit - taken])
                taken += len(chains[-1])
        batch, depth = [], 0
        while chains:
            batch += [chain[depth] for chain in chains]
            depth += 1
            chains = [chain for chain in chains if len(chain) > depth]
        return batch

    @staticmethod
    def _due(head: Tracked, now: datetime) -> bool:
        return head.status != AWAITED or head.next_attempt_at is None or head.next_attempt_at <= now

    def next_wake(self) -> datetime | None:
        """When a head waiting now falls due for its retry, or expires (None: no head waits)."""
        times = [t for head in self.heads() if head.status == AWAITED
                 for t in (head.next_attempt_at, self._deadline(head)) if t is not None]
        return min(times, default=None)

    def _deadline(self, event: Tracked) -> datetime | None:
        return None if event.clock is None else event.clock + timedelta(seconds=self.policy.ttl_seconds)

    def expire(self, now: datetime) -> None:
        """Every event not acknowledged within the ttl of its first attempt: EXPIRED (a dead letter)."""
        for events in list(self.by_key.values()):
            for event in [e for e in events if (d := self._deadline(e)) is not None and d <= now]:
                self._final(event, EXPIRED, now, EXPIRED,
                            f"not acknowledged within {self.policy.ttl_seconds:g} s of its first attempt "
                            f"({event.attempts} attempts; last: {event.last_error or 'none'})")

    def mark_sent(self, events: list[Tracked]) -> None:
        for event in events:
            event.unsent = (event.status, event.next_attempt_at)
            self._set(event, SENT)
            event.next_attempt_at = None

    def record(self, sent: list[Tracked], outcomes: list[Outcome], now: datetime) -> None:
        """The sink's outcomes of `sent`: acknowledgements first, so that a group cancelled by a
        rejection in the same round keeps the events its consumers did acknowledge."""
        if [o.event_id for o in outcomes] != [e.event_id for e in sent]:
            raise ValueError("a sink's outcomes must name the events sent, in order")
        order = {ACK: 0, HELD: 1, RETRY: 2, REJECT: 3}
        for event, outcome in sorted(zip(sent, outcomes), key=lambda pair: order[pair[1].verdict]):
            if outcome.verdict == HELD:  # not sent: as it was before the batch
                if event.status not in FINAL:
                    self._set(event, event.unsent[0])
                    event.next_attempt_at = event.unsent[1]
                continue
            self.tally["attempts"] += 1
            if event.event_id not in self.sent_ids:
                self.sent_ids.add(event.event_id)
                self.tally["sent"] += 1
            event.attempts += 1
            event.clock = event.clock or now
            self.attempt_rows.append(_attempt(event, now, outcome.verdict, outcome.detail))
            if outcome.verdict == ACK:
                self.tally["acked"] += 1
                self._final(event, ACKED, now)
            elif event.status in FINAL:  # cancelled with its group earlier in this round
                continue
            elif outcome.verdict == RETRY:
                self.tally["retried"] += 1
                self.last_error = outcome.detail
                self._set(event, AWAITED)
                event.next_attempt_at = now + self.policy.backoff(event.attempts)
                event.last_error = outcome.detail
            else:
                self.last_error = outcome.detail
                self._final(event, CANCELLED, now, None, outcome.detail)
                for other in list(self.groups.get(event.message_key, {}).values()):
                    self._final(other, CANCELLED, now, CANCELLED,
                                f"cancelled with its group (message_key {event.message_key}): event "
                                f"{event.event_id} was rejected: {outcome.detail}")

    def _set(self, event: Tracked, status: str) -> None:
        self.counts[event.status] -= 1
        self.counts[status] += 1
        event.status = status
        self.changed[event.event_id] = event

    def _final(self, event: Tracked, status: str, now: datetime, outcome: str | None = None,
               error: str | None = None) -> None:
        """`event` ends as `status` (a dead letter unless ACKED), its key's next event the head;
        `outcome`: a row of delivery/attempts for a change that no send made."""
        self._set(event, status)
        event.next_attempt_at, event.last_error = None, error
        if status != ACKED:
            self.tally["dead_letters"] += 1
        if outcome:
            self.attempt_rows.append(_attempt(event, now, outcome, error))
        events = self.by_key[event.key]
        events.remove(event)
        if not events:
            del self.by_key[event.key]
        group = self.groups[event.message_key]
        del group[event.event_id]
        if not group:
            del self.groups[event.message_key]

    def flush(self, now: datetime) -> tuple[list[dict], list[dict]]:
        """The changes since the last flush: (rows of delivery/state, rows of delivery/attempts)."""
        state = [event.row(now) for event in self.changed.values()]
        attempts, self.changed, self.attempt_rows = self.attempt_rows, {}, []
        return state, attempts


def _attempt(event: Tracked, at: datetime, outcome: str, detail: str | None) -> dict:
    return {"event_id": event.event_id, "attempt": event.attempts, "at": at, "outcome": outcome, "detail": detail}


def clocks(attempts: list[dict]) -> dict[str, datetime]:
    """Each event's ttl clock from its attempts (event_id, at, outcome): its first send
    since its latest requeue."""
    requeued: dict[str, datetime] = {}
    for row in attempts:
        if row["outcome"] == REQUEUED:
            requeued[row["event_id"]] = max(row["at"], requeued.get(row["event_id"], row["at"]))
    first: dict[str, datetime] = {}
    for row in attempts:
        event_id, at, since = row["event_id"], row["at"], requeued.get(row["event_id"])
        if row["outcome"] in SENDS and (since is None or at >= since):
            first[event_id] = min(at, first.get(event_id, at))
    return first
