"""What an event is, in plain Python: its kinds, its partition, its statuses. The Spark
twin of `partition_of` is `transforms/outbox.py`'s; a test holds them equal."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

CORRELATED, RETRACTED = "CORRELATED", "RETRACTED"
# delivery/state's statuses; the final ones never change again (a dead letter is requeued
# as a new attempt of the same event: `correlake deliver --requeue-dead-letters`).
PENDING, SENT, ACKED, AWAITED, CANCELLED, EXPIRED = "PENDING", "SENT", "ACKED", "AWAITED", "CANCELLED", "EXPIRED"
STATUSES = (PENDING, SENT, ACKED, AWAITED, CANCELLED, EXPIRED)
FINAL = (ACKED, CANCELLED, EXPIRED)
DEAD_LETTERS = (CANCELLED, EXPIRED)
HASH_HEX_DIGITS = 15  # 60 bits of the ordering key's SHA-256: a non-negative BIGINT in Spark too


def key_hash(tenant_id: str, ordering_key: str) -> int:
    """A stable hash of the ordering key: the first 60 bits of SHA-256 of `tenant NUL key`."""
    digest = hashlib.sha256(f"{tenant_id}\0{ordering_key}".encode()).hexdigest()
    return int(digest[:HASH_HEX_DIGITS], 16)


def partition_of(tenant_id: str, ordering_key: str, partitions: int) -> int:
    """The partition of an ordering key among `partitions`."""
    return key_hash(tenant_id, ordering_key) % partitions


@dataclass(frozen=True)
class Event:
    """One outbox event as a sink sends it: `body` is its JSON (UTF-8), `partition` the one
    this pass routes it to (also the body's)."""
    event_id: str
    kind: str
    tenant_id: str
    correlation_key: str
    ordering_key: str
    message_key: int
    sequence: int
    partition: int
    body: bytes

    @property
    def line(self) -> tuple[str, str]:
        """Its ordering key: (tenant_id, ordering_key)."""
        return self.tenant_id, self.ordering_key


ACK, RETRY, REJECT = "ACK", "RETRY", "REJECT"  # a sink's verdicts: acknowledged, recoverable, not recoverable
HELD = "HELD"  # not sent: an earlier event of its ordering key was not acknowledged, or the batch's time was up


@dataclass(frozen=True)
class Outcome:
    """What became of one sent event; `detail` names it for delivery/attempts (never a secret)."""
    event_id: str
    verdict: str
    detail: str = ""


class Sink(Protocol):
    """Where events go. `send` never raises for an event's own failure: each event gets an
    Outcome (RETRY when the sink is unreachable), in the order given.

    `send` gets the due chains of ordering keys, each key's events in sequence order, and
    keeps that order per key: a key's events go one after the other, and once one is not
    acknowledged, the key's later events are not sent (HELD). After the monotonic time
    `until`, nothing more is sent (HELD)."""

    def prepare(self, partitions: int) -> None:
        """Set up the destination (declare exchange and queues); raise DeliveryError if unusable."""

    def drained(self, old_partitions: int) -> bool:
        """Called before `prepare` when the last pass routed by `old_partitions` and this one
        routes otherwise (another N, or the ordering keys of a later contract revision):
        whether no event routed the old way waits in the destination any more
        (so that none of a key's events can overtake another). False: the pass sends nothing."""

    def send(self, events: list[Event], until: float | None = None) -> list[Outcome]: ...

    def close(self) -> None: ...
