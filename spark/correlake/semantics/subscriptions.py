"""Subscriptions (semantics rules 10-14): opening, closing, catching a message, pulling.

`Scopes` knows which element instances were left and which process instances ended
(rules 11, 20a); `Subscriptions` holds every subscription by id, owner and instance, and
the open ones per (name, key) and process in opening order (rule 17); `Catch` is the
correlation of a subscription with a message (rule 13) and the pull (rule 14).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterator

from correlake.contract.enums import (
    CATCH,
    CORRELATED,
    ELEMENT_LEFT,
    EVENT_SUBPROCESS,
    INSTANCE_ENDED,
    SIBLING_CORRELATED,
)
from correlake.semantics.buffer import Message, MessageBuffer
from correlake.semantics.correlations import Correlations


@dataclass(slots=True)
class Subscription:
    row: dict  # the gold/subscriptions row, updated in place
    position: int
    is_open: bool = True

    @property
    def interrupting(self) -> bool:
        return self.row["interrupting"]

    @property
    def process(self) -> str:
        return self.row["bpmn_process_id"]

    @property
    def owner(self) -> str:
        return self.row["element_instance_key"]

    @property
    def is_event_subprocess(self) -> bool:
        return self.row["element_type"] == EVENT_SUBPROCESS


class Scopes:
    """Element instances left and process instances ended (rule 11), and the process
    instances an INSTANCE_ENDED was seen for (rule 20a: only the first counts)."""

    def __init__(self):
        self.left: set[str] = set()
        self.ended: set[str] = set()
        self._ends_seen: set[str] = set()

    def is_gone(self, element_instance_key: str, process_instance_key: str) -> bool:
        return element_instance_key in self.left or process_instance_key in self.ended

    def first_end(self, process_instance_key: str) -> bool:
        """Whether this is the first INSTANCE_ENDED for the instance (and note it)."""
        if process_instance_key in self._ends_seen:
            return False
        self._ends_seen.add(process_instance_key)
        return True


class Subscriptions:
    """Every subscription of a partition, identified by (element_instance_key, message_name)."""

    def __init__(self, scopes: Scopes):
        self.scopes = scopes
        self._by_id: dict[tuple, Subscription] = {}
        self._by_owner: dict[str, list[Subscription]] = {}
        self._by_instance: dict[str, list[Subscription]] = {}
        self._by_process: dict[tuple, dict[str, list]] = {}  # (name, key) -> process -> heap by (opened_at, position)

    def open(self, record: dict) -> Subscription | None:
        """Rules 10-11: the subscription a SUBSCRIPTION_OPENED opens, or None when it is ignored."""
        sid = (record["element_instance_key"], record["message_name"])
        if sid in self._by_id or self.scopes.is_gone(record["element_instance_key"], record["process_instance_key"]):
            return None
        row = {
            "tenant_id": record["tenant_id"],
            "element_instance_key": record["element_instance_key"],
            "message_name": record["message_name"],
            "bpmn_process_id": record["bpmn_process_id"],
            "process_version": record["process_version"],
            "process_instance_key": record["process_instance_key"],
            "element_id": record["element_id"],
            "element_type": record["element_type"],
            "correlation_key": record["correlation_key"],
            "interrupting": record["interrupting"],
            "opened_at": record["t"],
            "closed_at": None,
            "close_reason": None,
            "correlation_count": 0,
        }
        sub = Subscription(row, record["position"])
        self._by_id[sid] = sub
        self._by_owner.setdefault(sub.owner, []).append(sub)
        self._by_instance.setdefault(row["process_instance_key"], []).append(sub)
        heap = self._by_process.setdefault((row["message_name"], row["correlation_key"]), {}) \
            .setdefault(sub.process, [])
        heapq.heappush(heap, (row["opened_at"], sub.position, sub))
        return sub

    def first_opened(self, name: str, key: str) -> Iterator[Subscription]:
        """Rule 17: per process (in name order), its open subscription on (name, key) that
        opened first, looked up when the iteration reaches the process."""
        for _process, heap in sorted(self._by_process.get((name, key), {}).items()):
            while heap and not heap[0][2].is_open:
                heapq.heappop(heap)
            if heap:
                yield heap[0][2]

    @staticmethod
    def close(sub: Subscription, t: int, reason: str) -> None:
        """Rule 11: closing is permanent; the first close stands."""
        if sub.is_open:
            sub.is_open = False
            sub.row["closed_at"] = t
            sub.row["close_reason"] = reason

    def close_after_correlation(self, sub: Subscription, t: int) -> None:
        """Rule 13: an interrupting `sub` correlated at `t`."""
        self.close(sub, t, CORRELATED)
        esp = sub.is_event_subprocess
        for sibling in self._by_owner.get(sub.owner, ()):
            if not esp or sibling.is_event_subprocess:
                self.close(sibling, t, SIBLING_CORRELATED)
        if not esp:
            self.scopes.left.add(sub.owner)

    def element_left(self, owner: str, t: int) -> None:
        """Rule 11: the owner element instance is left."""
        self.scopes.left.add(owner)
        for sub in self._by_owner.get(owner, ()):
            self.close(sub, t, ELEMENT_LEFT)

    def instance_ended(self, instance_key: str, t: int) -> None:
        """Rule 11: the process instance ended."""
        self.scopes.ended.add(instance_key)
        for sub in self._by_instance.get(instance_key, ()):
            self.close(sub, t, INSTANCE_ENDED)

    def rows(self) -> list[dict]:
        return [s.row for s in self._by_id.values()]


class Catch:
    """A subscription taking messages: correlation (rules 12-13) and pull (rule 14)."""

    def __init__(self, subscriptions: Subscriptions, buffer: MessageBuffer, correlations: Correlations):
        self.subscriptions = subscriptions
        self.buffer = buffer
        self.correlations = correlations

    def correlate(self, sub: Subscription, m: Message, t: int) -> None:
        row = sub.row
        self.correlations.record(m, t, sub.process, row["process_version"], row["process_instance_key"],
                                 sub.owner, row["element_id"], CATCH)
        row["correlation_count"] += 1
        if sub.interrupting:
            self.subscriptions.close_after_correlation(sub, t)

    def pull(self, sub: Subscription, t: int) -> None:
        """Rule 14: take the first buffered message not yet correlated with the process; a
        non-interrupting subscription takes again until none is left."""
        name, key = sub.row["message_name"], sub.row["correlation_key"]
        if not self.buffer.has(name, key):
            return
        while sub.is_open:
            m = self.buffer.first_for(name, key, sub.process, t)
            if m is None:
                return
            self.correlate(sub, m, t)
            if sub.interrupting:
                return
