"""The delivery pass's rules without I/O: due chains, held events, back-off, groups, expiry,
ttl clocks."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta, timezone

from correlake.delivery.events import ACK, HELD, REJECT, RETRY, Outcome
from correlake.delivery.ledger import Ledger, Policy, Tracked, clocks

T0 = datetime(2026, 11, 2, 12, tzinfo=timezone.utc)


def ledger(*events: Tracked, ttl: float = 60.0) -> Ledger:
    counts = Counter(e.status for e in events)
    return Ledger(list(events), counts, Policy(ttl, 1.0, 8.0, random.Random(1)))


def ev(event_id: str, key: str, sequence: int, message_key: int, **state) -> Tracked:
    return Tracked(event_id, ("t", key), message_key, sequence, 0, **state)


def test_backoff_is_full_jitter_under_the_capped_exponential():
    policy = Policy(60.0, 1.0, 8.0, random.Random(7))
    for attempt, ceiling in [(1, 1), (2, 2), (3, 4), (4, 8), (9, 8), (500, 8)]:
        waits = [policy.backoff(attempt).total_seconds() for _ in range(200)]
        assert 0 <= min(waits) and max(waits) <= ceiling and max(waits) > ceiling / 2


def test_due_chains_are_interleaved_and_a_waiting_head_holds_its_key():
    book = ledger(ev("a2", "A", 2, 2), ev("a1", "A", 1, 1), ev("b1", "B", 1, 3), ev("a3", "A", 3, 4))
    assert [e.event_id for e in book.due(T0, 10)] == ["a1", "b1", "a2", "a3"]
    assert [e.event_id for e in book.due(T0, 3)] == ["a1", "a2", "a3"]  # whole chains, key after key
    assert [e.event_id for e in book.due(T0, 2)] == ["a1", "a2"]
    a1, b1, a2, a3 = book.due(T0, 10)
    book.mark_sent([a1, b1, a2, a3])
    book.record([a1, b1, a2, a3], [Outcome("a1", RETRY, "HTTP 503"), Outcome("b1", ACK),
                                   Outcome("a2", HELD, "held"), Outcome("a3", HELD, "held")], T0)
    assert a1.status == "AWAITED" and T0 <= a1.next_attempt_at <= T0 + timedelta(seconds=1)
    assert (a2.status, a2.attempts, a3.status) == ("PENDING", 0, "PENDING")  # held: not sent, as before
    assert book.due(T0, 10) == [] and book.next_wake() == a1.next_attempt_at
    assert [e.event_id for e in book.due(a1.next_attempt_at, 10)] == ["a1", "a2", "a3"]
    assert book.counts == Counter({"AWAITED": 1, "PENDING": 2, "ACKED": 1, "SENT": 0})
    assert book.tally == Counter(sent=2, attempts=2, acked=1, retried=1)
    state, attempts = book.flush(T0)
    assert {r["event_id"]: r["status"] for r in state} == {"a1": "AWAITED", "b1": "ACKED", "a2": "PENDING",
                                                           "a3": "PENDING"}
    assert [a["event_id"] for a in attempts] == ["b1", "a1"]  # a held event has no attempt


def test_a_rejection_cancels_the_group_but_not_what_was_acknowledged_with_it():
    book = ledger(ev("a1", "A", 1, 7), ev("a2", "A", 2, 7), ev("b1", "B", 1, 7), ev("c1", "C", 1, 8))
    batch = book.due(T0, 10)
    assert [e.event_id for e in batch] == ["a1", "b1", "c1", "a2"]
    book.mark_sent(batch)
    book.record(batch, [Outcome("a1", REJECT, "HTTP 422"), Outcome("b1", ACK), Outcome("c1", ACK),
                        Outcome("a2", HELD, "held")], T0)
    assert [batch[0].status, batch[1].status] == ["CANCELLED", "ACKED"]
    assert book.by_key == {} and book.tally == Counter(sent=3, attempts=3, acked=2, dead_letters=2)
    state, attempts = book.flush(T0)
    assert {r["event_id"]: r["status"] for r in state} == {"a1": "CANCELLED", "a2": "CANCELLED",
                                                           "b1": "ACKED", "c1": "ACKED"}
    assert [(a["event_id"], a["outcome"]) for a in attempts] == [("b1", "ACK"), ("c1", "ACK"), ("a1", "REJECT"),
                                                                 ("a2", "CANCELLED")]


def test_expiry_counts_from_the_first_attempt_and_unblocks_the_key():
    book = ledger(ev("a1", "A", 1, 1, status="AWAITED", attempts=3, next_attempt_at=T0 + timedelta(hours=1),
                     clock=T0), ev("a2", "A", 2, 2), ttl=60)
    book.expire(T0 + timedelta(seconds=59))
    assert book.due(T0 + timedelta(seconds=59), 10) == [] and book.next_wake() == T0 + timedelta(seconds=60)
    book.expire(T0 + timedelta(seconds=60))
    assert [e.event_id for e in book.due(T0 + timedelta(seconds=60), 10)] == ["a2"]
    (row,), (attempt,) = book.flush(T0)
    assert row["status"] == "EXPIRED" and attempt["outcome"] == "EXPIRED" and attempt["attempt"] == 3


def test_the_ttl_clock_starts_again_after_a_requeue():
    at = [T0 + timedelta(minutes=m) for m in range(5)]
    rows = [{"event_id": "a", "at": at[0], "outcome": "RETRY"}, {"event_id": "a", "at": at[1], "outcome": "EXPIRED"},
            {"event_id": "a", "at": at[2], "outcome": "REQUEUED"}, {"event_id": "a", "at": at[4], "outcome": "RETRY"},
            {"event_id": "a", "at": at[3], "outcome": "RETRY"}, {"event_id": "b", "at": at[1], "outcome": "ACK"},
            {"event_id": "c", "at": at[1], "outcome": "REQUEUED"}]
    assert clocks(rows) == {"a": at[3], "b": at[1]}
