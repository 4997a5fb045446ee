"""Message start events (semantics rules 18-21, 20a).

`Deployments`: the current deployment of each process (rule 18). `StartLocks`: the lock
per (process, correlation key) held by the active instance a message started (rules 19,
21). `StartedInstances`: the instances started, and the ends held until their start
(rule 20a). `MessageStarts`: starting an instance, and the release that starts the next.

The key of a started instance, `msg-start:{bpmn_process_id}:{message_key}` (rule 20), is
built and parsed here only: in Python, and as Spark SQL expressions for the Spark side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from correlake.contract.enums import START
from correlake.semantics.buffer import Message, MessageBuffer
from correlake.semantics.correlations import Correlations

START_PREFIX = "msg-start:"


def start_instance_key(process: str, message_key: int) -> str:
    """Rule 20: the key of the instance of `process` that message `message_key` starts."""
    return f"{START_PREFIX}{process}:{message_key}"


def is_start_instance_key(instance_key: str) -> bool:
    """Whether the key has the form reserved for instances correlake starts."""
    return instance_key.startswith(START_PREFIX)


def start_instance_key_sql(process: str, message_key: str) -> str:
    """`start_instance_key` as a Spark SQL expression over the two columns named."""
    return f"format_string('{START_PREFIX}%s:%d', {process}, {message_key})"


# Java's `$` (Spark's regexp_extract): the end, or before a line terminator that ends the text
_STARTED = re.compile(r":(-?[0-9]+)(?:\r\n|[\n\r\u0085\u2028\u2029])?\Z")


def started_message_key(instance_key: str | None) -> int | None:
    """The message position inside a start instance key, else None (also for a key of the
    reserved form that no message position fits): `started_message_key_sql`'s value."""
    if instance_key is None or not is_start_instance_key(instance_key):
        return None
    found = _STARTED.search(instance_key)
    value = int(found.group(1)) if found else None
    return value if value is not None and -2**63 <= value < 2**63 else None


def started_message_key_sql(instance_key: str) -> str:
    """A Spark SQL expression: the message position inside a start instance key in column
    `instance_key`, else null (also for a key of the reserved form that no message
    position fits)."""
    return (f"CASE WHEN startswith({instance_key}, '{START_PREFIX}') "
            f"THEN try_cast(regexp_extract({instance_key}, ':(-?[0-9]+)$', 1) AS BIGINT) END")


class Deployments:
    """Rule 18: per process, the version and start event names of its last deployment."""

    def __init__(self):
        self._current: dict[str, tuple[int, frozenset]] = {}  # process -> (version, start event names)
        self._starting: dict[str, set[str]] = {}  # message name -> processes with a start event of that name

    def deploy(self, process: str, version: int, names) -> None:
        old = self._current.get(process)
        if old:
            for name in old[1]:
                self._starting[name].discard(process)
        self._current[process] = (version, frozenset(names))
        for name in names:
            self._starting.setdefault(name, set()).add(process)

    def version(self, process: str) -> int:
        return self._current[process][0]

    def start_names(self, process: str) -> frozenset:
        current = self._current.get(process)
        return current[1] if current else frozenset()

    def processes_starting(self, name: str) -> list[str]:
        """The processes with a start event `name`, in name order."""
        return sorted(self._starting.get(name, ()))


class StartLocks:
    """Rules 19-21: the lock (process, correlation key) and the instance holding it."""

    def __init__(self):
        self._holders: dict[tuple, str] = {}

    @staticmethod
    def lock_for(process: str, key: str) -> tuple | None:
        """The lock a start of `process` by a message with `key` takes; none for "" (rule 20)."""
        return (process, key) if key != "" else None

    def active(self, lock: tuple) -> bool:
        """Whether an active instance holds the lock."""
        return lock in self._holders

    def take(self, lock: tuple, instance_key: str) -> None:
        self._holders[lock] = instance_key

    def release(self, lock: tuple, instance_key: str) -> bool:
        """Release the lock if `instance_key` holds it; whether it did."""
        if self._holders.get(lock) != instance_key:
            return False
        del self._holders[lock]
        return True


@dataclass(slots=True)
class StartedInstance:
    row: dict  # the gold/message_started_instances row
    lock: tuple | None


class StartedInstances:
    """Rules 20, 20a: the instances started by messages, and the ends waiting for their start."""

    def __init__(self):
        self._by_key: dict[str, StartedInstance] = {}
        self._held_ends: set[str] = set()

    def add(self, instance: StartedInstance) -> None:
        self._by_key[instance.row["process_instance_key"]] = instance

    def get(self, instance_key: str) -> StartedInstance | None:
        return self._by_key.get(instance_key)

    def not_started_yet(self, instance_key: str) -> bool:
        """Rule 20a: the key names an instance a message would start, not started yet."""
        return is_start_instance_key(instance_key) and instance_key not in self._by_key

    def hold_end(self, instance_key: str) -> None:
        self._held_ends.add(instance_key)

    def take_held_end(self, instance_key: str) -> bool:
        """Whether an end was held for the instance (it is no longer held)."""
        if instance_key not in self._held_ends:
            return False
        self._held_ends.discard(instance_key)
        return True

    def rows(self) -> list[dict]:
        return [i.row for i in self._by_key.values()]


class MessageStarts:
    """Starting instances by message (rules 19-20) and the lock's release (rule 21).
    `end_instance(key, t)`: what an instance's end does (a held end applies at the start)."""

    def __init__(self, tenant_id: str, deployments: Deployments, locks: StartLocks, instances: StartedInstances,
                 buffer: MessageBuffer, correlations: Correlations, end_instance: Callable[[str, int], None]):
        self.tenant_id = tenant_id
        self.deployments = deployments
        self.locks = locks
        self.instances = instances
        self.buffer = buffer
        self.correlations = correlations
        self.end_instance = end_instance

    def try_start(self, process: str, m: Message, t: int) -> None:
        """Rule 19: start an instance of `process` with `m` at `t`, unless the lock is active."""
        lock = StartLocks.lock_for(process, m.key)
        if lock is not None and self.locks.active(lock):
            return
        version = self.deployments.version(process)
        key = start_instance_key(process, m.position)
        self.correlations.record(m, t, process, version, key, None, None, START)
        self.instances.add(StartedInstance(
            {
                "process_instance_key": key,
                "tenant_id": self.tenant_id,
                "bpmn_process_id": process,
                "process_version": version,
                "message_key": m.position,
                "correlation_key": m.key,
                "started_at": t,
                "ended_at": None,
            },
            lock,
        ))
        if lock is not None:
            self.locks.take(lock, key)
        if self.instances.take_held_end(key):  # rule 20a
            self.end_instance(key, t)

    def instance_ended(self, instance_key: str, t: int) -> None:
        """The instance ended at `t`: if a message started it, note the end and release its
        lock (rule 21)."""
        instance = self.instances.get(instance_key)
        if instance is None:
            return
        instance.row["ended_at"] = t
        if instance.lock is not None and self.locks.release(instance.lock, instance_key):
            self._start_next(*instance.lock, t)

    def _start_next(self, process: str, key: str, t: int) -> None:
        """Rule 21: the oldest buffered message on a current start event name of the
        process, with the lock's key and not yet correlated with it, starts the next instance."""
        best = None
        for name in self.deployments.start_names(process):
            m = self.buffer.first_for(name, key, process, t)
            if m is not None and (best is None or (m.t, m.position) < (best.t, best.position)):
                best = m
        if best is not None:
            self.try_start(process, best, t)
