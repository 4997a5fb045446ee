"""The correlation engine: one sequential pass over the records of one partition.

Pure Python, no Spark. A partition holds every record of a set of
`(tenant_id, correlation_key)` pairs that can influence each other (see
`routing.py`), sorted in the total order of semantics rule 2 (with the groups of
rule 3). `correlate_partition` replays them and returns the gold rows.

Events are dicts with `kind` = M (message publish), O (subscription opened),
L (element left) or E (instance ended), the time `t` in epoch millis, `position`
and `grp` (for O: the lowest position of its rule-3 group). Deployments are
given per tenant, sorted by `(t, position)`, and merged into the order here.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

START_PREFIX = "msg-start:"
ESP = "EVENT_SUBPROCESS"


@dataclass(slots=True)
class Message:
    position: int
    t: int
    name: str
    key: str
    ttl_ms: int
    accepted: bool
    variables: str
    procs: set = field(default_factory=set)  # bpmn_process_ids it correlated to


@dataclass(slots=True)
class Subscription:
    row: dict  # the gold/subscriptions row, updated in place
    position: int
    is_open: bool = True

    @property
    def interrupting(self) -> bool:
        return self.row["interrupting"]


@dataclass(slots=True)
class Instance:
    row: dict  # the gold/message_started_instances row
    lock: tuple | None


class PartitionState:
    """Everything one partition's pass knows, and the rules that act on it."""

    def __init__(self, tenant_id: str):
        self.tenant_id = tenant_id
        self.buffers: dict[tuple, list[Message]] = {}  # (name, key) -> buffered, FIFO order
        self.cursors: dict[tuple, int] = {}  # (name, key, process) -> first index worth scanning
        self.open_heaps: dict[tuple, dict[str, list]] = {}  # (name, key) -> process -> heap
        self.subs: dict[tuple, Subscription] = {}  # (element_instance_key, message_name)
        self.by_owner: dict[str, list[Subscription]] = {}
        self.by_instance: dict[str, list[Subscription]] = {}
        self.left: set[str] = set()
        self.ended: set[str] = set()
        self.end_seen: set[str] = set()
        self.held_ends: set[str] = set()
        self.instances: dict[str, Instance] = {}
        self.locks: dict[tuple, str] = {}  # (process, key) -> holding instance key
        self.deployed: dict[str, tuple[int, frozenset]] = {}  # process -> (version, start names)
        self.starters: dict[str, set[str]] = {}  # message name -> processes
        self.correlations: list[dict] = []

    # -- deployments (rule 18) -------------------------------------------------
    def deploy(self, process: str, version: int, names) -> None:
        old = self.deployed.get(process)
        if old:
            for name in old[1]:
                self.starters[name].discard(process)
        self.deployed[process] = (version, frozenset(names))
        for name in names:
            self.starters.setdefault(name, set()).add(process)

    # -- messages (rules 5-9, 17) ------------------------------------------------
    def publish(self, ev: dict) -> None:
        m = Message(ev["position"], ev["t"], ev["name"], ev["correlation_key"], ev["ttl_ms"],
                    ev["accepted"], ev["variables"])
        if not m.accepted:
            return
        t = m.t
        if m.ttl_ms > 0:
            self.buffers.setdefault((m.name, m.key), []).append(m)
        took = []
        for _process, heap in sorted(self.open_heaps.get((m.name, m.key), {}).items()):
            sub = _first_open(heap)
            if sub is not None:
                self.correlate(sub, m, t)
                if not sub.interrupting:
                    took.append(sub)
        for process in sorted(self.starters.get(m.name, ())):
            if process not in m.procs:
                self.try_start(process, m, t)
        for sub in took:
            self.pull(sub, t)

    def pull(self, sub: Subscription, t: int) -> None:
        """Rule 14: take the first buffered message not yet correlated to the process."""
        row = sub.row
        name, key, process = row["message_name"], row["correlation_key"], row["bpmn_process_id"]
        buffer = self.buffers.get((name, key))
        if not buffer:
            return
        cursor_key = (name, key, process)
        while sub.is_open:
            m = self._first_available(buffer, cursor_key, process, t)
            if m is None:
                return
            self.correlate(sub, m, t)
            if sub.interrupting:
                return

    def _first_available(self, buffer: list, cursor_key: tuple, process: str, t: int) -> Message | None:
        """FIFO scan; the messages before the first available one are gone for good for
        this process (taken by it or expired), so the cursor moves past them."""
        for j in range(self.cursors.get(cursor_key, 0), len(buffer)):
            m = buffer[j]
            if process not in m.procs and m.t + m.ttl_ms > t:
                self.cursors[cursor_key] = j
                return m
        self.cursors[cursor_key] = len(buffer)
        return None

    # -- subscriptions (rules 10-14) -----------------------------------------------
    def open_group(self, group: list[dict]) -> None:
        """Rule 3: open every member at the group's place, then each pulls."""
        opened = []
        for ev in group:
            sid = (ev["element_instance_key"], ev["message_name"])
            if sid in self.subs or ev["element_instance_key"] in self.left \
                    or ev["process_instance_key"] in self.ended:
                continue
            row = {
                "tenant_id": ev["tenant_id"],
                "element_instance_key": ev["element_instance_key"],
                "message_name": ev["message_name"],
                "bpmn_process_id": ev["bpmn_process_id"],
                "process_version": ev["process_version"],
                "process_instance_key": ev["process_instance_key"],
                "element_id": ev["element_id"],
                "element_type": ev["element_type"],
                "correlation_key": ev["correlation_key"],
                "interrupting": ev["interrupting"],
                "opened_at": ev["t"],
                "closed_at": None,
                "close_reason": None,
                "correlation_count": 0,
            }
            sub = Subscription(row, ev["position"])
            self.subs[sid] = sub
            self.by_owner.setdefault(row["element_instance_key"], []).append(sub)
            self.by_instance.setdefault(row["process_instance_key"], []).append(sub)
            heap = self.open_heaps.setdefault((row["message_name"], row["correlation_key"]), {}) \
                .setdefault(row["bpmn_process_id"], [])
            heapq.heappush(heap, (row["opened_at"], sub.position, sub))
            opened.append(sub)
        for sub in opened:
            if sub.is_open:
                self.pull(sub, sub.row["opened_at"])

    def close(self, sub: Subscription, t: int, reason: str) -> None:
        if sub.is_open:
            sub.is_open = False
            sub.row["closed_at"] = t
            sub.row["close_reason"] = reason

    def correlate(self, sub: Subscription, m: Message, t: int) -> None:
        row = sub.row
        self._record(m, t, row["bpmn_process_id"], row["process_version"], row["process_instance_key"],
                     row["element_instance_key"], row["element_id"], "CATCH")
        row["correlation_count"] += 1
        if not sub.interrupting:
            return
        self.close(sub, t, "CORRELATED")
        owner = row["element_instance_key"]
        is_esp = row["element_type"] == ESP
        for sibling in self.by_owner.get(owner, ()):
            if not is_esp or sibling.row["element_type"] == ESP:
                self.close(sibling, t, "SIBLING_CORRELATED")
        if not is_esp:
            self.left.add(owner)

    def element_left(self, ev: dict) -> None:
        owner = ev["element_instance_key"]
        self.left.add(owner)
        for sub in self.by_owner.get(owner, ()):
            self.close(sub, ev["t"], "ELEMENT_LEFT")

    # -- instances, start events and the lock (rules 19-21) -----------------------
    def instance_ended(self, ev: dict) -> None:
        key = ev["process_instance_key"]
        if key in self.end_seen:
            return
        self.end_seen.add(key)
        if key.startswith(START_PREFIX) and key not in self.instances:
            self.held_ends.add(key)
            return
        self._end(key, ev["t"])

    def _end(self, key: str, t: int) -> None:
        self.ended.add(key)
        for sub in self.by_instance.get(key, ()):
            self.close(sub, t, "INSTANCE_ENDED")
        inst = self.instances.get(key)
        if inst is None:
            return
        inst.row["ended_at"] = t
        if inst.lock is not None and self.locks.get(inst.lock) == key:
            del self.locks[inst.lock]
            self._release(*inst.lock, t)

    def try_start(self, process: str, m: Message, t: int) -> None:
        lock = (process, m.key) if m.key != "" else None
        if lock is not None and lock in self.locks:
            return
        version = self.deployed[process][0]
        key = f"{START_PREFIX}{process}:{m.position}"
        self._record(m, t, process, version, key, None, None, "START")
        self.instances[key] = Instance(
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
        )
        if lock is not None:
            self.locks[lock] = key
        if key in self.held_ends:
            self.held_ends.discard(key)
            self._end(key, t)

    def _release(self, process: str, key: str, t: int) -> None:
        """Rule 21: the oldest buffered start candidate with that key starts next."""
        deployed = self.deployed.get(process)
        if not deployed or not deployed[1]:
            return
        best = None
        for name in deployed[1]:
            buffer = self.buffers.get((name, key))
            if buffer:
                m = self._first_available(buffer, (name, key, process), process, t)
                if m is not None and (best is None or (m.t, m.position) < (best.t, best.position)):
                    best = m
        if best is not None:
            self.try_start(process, best, t)

    def _record(self, m: Message, t: int, process: str, version, instance_key: str,
                element_instance_key, element_id, kind: str) -> None:
        m.procs.add(process)
        self.correlations.append({
            "message_key": m.position,
            "tenant_id": self.tenant_id,
            "message_name": m.name,
            "correlation_key": m.key,
            "bpmn_process_id": process,
            "process_version": version,
            "process_instance_key": instance_key,
            "element_instance_key": element_instance_key,
            "element_id": element_id,
            "subscription_type": kind,
            "correlated_at": t,
            "message_published_at": m.t,
            "variables": m.variables,
        })


def _first_open(heap: list) -> Subscription | None:
    while heap and not heap[0][2].is_open:
        heapq.heappop(heap)
    return heap[0][2] if heap else None


def _order(ev: dict) -> tuple:
    return (ev["t"], 1 if ev["kind"] == "M" else 0, ev["grp"], ev["position"])


def correlate_partition(tenant_id: str, events, deployments: list[dict]) -> dict[str, list[dict]]:
    """Replay one partition's sorted events; return gold rows by table.

    `deployments`: this tenant's PROCESS_DEPLOYED records (keys t, position,
    bpmn_process_id, process_version, message_start_events), sorted by (t, position).
    """
    state = PartitionState(tenant_id)
    d = 0
    group: list[dict] = []

    def flush_group():
        if group:
            state.open_group(group)
            group.clear()

    for ev in events:
        order = _order(ev)
        while d < len(deployments) and (deployments[d]["t"], 0, deployments[d]["position"]) < order[:3]:
            flush_group()
            dep = deployments[d]
            state.deploy(dep["bpmn_process_id"], dep["process_version"], dep["message_start_events"] or ())
            d += 1
        kind = ev["kind"]
        if kind == "O":
            if group and group[0]["grp"] != ev["grp"]:
                flush_group()
            group.append(ev)
            continue
        flush_group()
        if kind == "M":
            state.publish(ev)
        elif kind == "L":
            state.element_left(ev)
        else:
            state.instance_ended(ev)
    flush_group()
    return {
        "correlations": state.correlations,
        "subscriptions": [s.row for s in state.subs.values()],
        "message_started_instances": [i.row for i in state.instances.values()],
    }
