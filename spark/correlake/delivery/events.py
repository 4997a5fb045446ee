"""What an event is, in plain Python: its kinds, its partition, its statuses. The Spark
twin of `partition_of` is `transforms/outbox.py`'s; a test holds them equal."""

from __future__ import annotations

import hashlib

CORRELATED, RETRACTED = "CORRELATED", "RETRACTED"
# delivery/state's statuses; the final ones never change again (a dead letter is requeued
# as a new attempt of the same event: `correlake deliver --requeue-dead-letters`).
PENDING, SENT, ACKED, AWAITED, CANCELLED, EXPIRED = "PENDING", "SENT", "ACKED", "AWAITED", "CANCELLED", "EXPIRED"
FINAL = (ACKED, CANCELLED, EXPIRED)
DEAD_LETTERS = (CANCELLED, EXPIRED)
HASH_HEX_DIGITS = 15  # 60 bits of the ordering key's SHA-256: a non-negative BIGINT in Spark too


def key_hash(tenant_id: str, correlation_key: str) -> int:
    """A stable hash of the ordering key: the first 60 bits of SHA-256 of `tenant NUL key`."""
    digest = hashlib.sha256(f"{tenant_id}\0{correlation_key}".encode()).hexdigest()
    return int(digest[:HASH_HEX_DIGITS], 16)


def partition_of(tenant_id: str, correlation_key: str, partitions: int) -> int:
    """The partition of an ordering key among `partitions`."""
    return key_hash(tenant_id, correlation_key) % partitions
