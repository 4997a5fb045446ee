"""The message buffer (semantics rules 6, 9, 14) and the buffered predicate (rules 6, 7, 23).

A message is buffered at `t` exactly when `is_buffered(ttl_ms, deadline, t)`; its SQL
twin is `sql/rules/buffered.sql` (a test holds the two equal). Accepted messages with a
TTL wait in one FIFO queue per (name, correlation key); a correlation leaves them there
for other processes (rule 9), and each process pulls from a queue with its own cursor.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def deadline(published_at: int, ttl_ms: int) -> int:
    """Rule 6: `published_at + ttl_ms` (epoch millis)."""
    return published_at + ttl_ms


def is_buffered(ttl_ms: int, deadline: int, t: int) -> bool:
    """Rule 6: available at `t` to a subscription or start that comes later."""
    return ttl_ms > 0 and deadline > t


@dataclass(slots=True)
class Message:
    """An accepted or rejected message publish; `processes`: the processes it correlated
    with (rule 15)."""
    position: int
    t: int
    name: str
    key: str
    ttl_ms: int
    accepted: bool
    variables: str
    processes: set = field(default_factory=set)

    @classmethod
    def of(cls, record: dict) -> Message:
        return cls(record["position"], record["t"], record["name"], record["correlation_key"], record["ttl_ms"],
                   record["accepted"], record["variables"])

    def is_buffered(self, t: int) -> bool:
        return is_buffered(self.ttl_ms, deadline(self.t, self.ttl_ms), t)


class MessageBuffer:
    """Buffered messages per (name, key) in publish order, and per process a cursor."""

    def __init__(self):
        self._queues: dict[tuple, list[Message]] = {}  # (name, key) -> messages, FIFO
        self._cursors: dict[tuple, int] = {}  # (name, key, process) -> first index worth scanning

    def add(self, m: Message) -> None:
        """A message just published (messages come in order); rule 6: one not buffered at
        its publish instant (TTL 0) never is."""
        if m.is_buffered(m.t):
            self._queues.setdefault((m.name, m.key), []).append(m)

    def has(self, name: str, key: str) -> bool:
        return bool(self._queues.get((name, key)))

    def first_for(self, name: str, key: str, process: str, t: int) -> Message | None:
        """Rule 14: the earliest message buffered at `t` that has not correlated with
        `process`. Those before it are gone for good for the process (taken by it, or
        expired), so its cursor moves past them."""
        queue = self._queues.get((name, key))
        if not queue:
            return None
        cursor = (name, key, process)
        for j in range(self._cursors.get(cursor, 0), len(queue)):
            m = queue[j]
            if process not in m.processes and m.is_buffered(t):
                self._cursors[cursor] = j
                return m
        self._cursors[cursor] = len(queue)
        return None
