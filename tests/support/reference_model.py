"""A small, naive, sequential reference model of semantics.md, for property tests.

Deliberately simple and independent of the engine: global state, linear scans, and
its own reading of the landing records (`normalise`, written from contract.md for the
value space of tests/support/generators.py and the conformance scenarios), so that no parsing
rule of correlake's is shared with the engine it checks.
Input: landing records as written (JSON values). Output: gold-shaped rows, times in
epoch millis, `variables` as JSON values.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

OPEN = "SUBSCRIPTION_OPENED"
DEFAULT_TENANT = "<default>"
DEFAULT_TTL_MS = 3_600_000
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:(Z)|([+-])(\d\d):(\d\d))")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def millis(value) -> int:
    """contract *Times*: epoch millis, or ISO-8601 with an offset (sub-millis truncated)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _ISO.fullmatch(value)
    if match is None:
        raise ValueError(f"not a time with an offset: {value!r}")
    y, mo, d, h, mi, s, frac, z, sign, oh, om = match.groups()
    offset = timedelta() if z else (1 if sign == "+" else -1) * timedelta(hours=int(oh), minutes=int(om))
    t = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone(offset))
    return (t - _EPOCH) // timedelta(milliseconds=1) + int((frac or "")[:3].ljust(3, "0"))


def key_text(value) -> str:
    """contract *Keys*: text unchanged, an integer as its digits, another number truncated."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"not a key: {value!r}")
    return value if isinstance(value, str) else str(int(value))


def normalise(stream: str, r: dict) -> dict:
    """One landing record with the contract's defaults applied."""
    out = {"position": r["position"], "tenant_id": r.get("tenant_id") or DEFAULT_TENANT}
    if stream == "messages":
        ttl = r.get("ttl_ms")
        variables = r.get("variables")
        return dict(out, name=r["name"], correlation_key=key_text(r["correlation_key"]),
                    published_at=millis(r["published_at"]), ttl_ms=DEFAULT_TTL_MS if ttl is None else ttl,
                    message_id=r.get("message_id") or None, variables={} if variables is None else variables)
    out.update(type=r["type"], timestamp=millis(r["timestamp"]))
    for k in ("process_instance_key", "element_instance_key"):
        if r.get(k) is not None:
            out[k] = key_text(r[k])
    if r["type"] == "PROCESS_DEPLOYED":
        out.update(bpmn_process_id=r["bpmn_process_id"], process_version=r["process_version"],
                   message_start_events=r.get("message_start_events") or [])
    elif r["type"] == OPEN:
        reads_flag = r["element_type"] in ("BOUNDARY_EVENT", "EVENT_SUBPROCESS")
        out.update(bpmn_process_id=r["bpmn_process_id"], process_version=r.get("process_version", 1),
                   element_id=r.get("element_id"), element_type=r["element_type"], message_name=r["message_name"],
                   correlation_key=key_text(r["correlation_key"]),
                   interrupting=r.get("interrupting") is not False if reads_flag else True)
    return out


def distinct(stream: str, records: list[dict]) -> list[dict]:
    """A stream's records, normalised, exact replays collapsed (the model knows no conflicts)."""
    first: dict[int, dict] = {}
    for r in records:
        if first.setdefault(r["position"], r) != r:
            raise ValueError(f"conflicting records at {stream} position {r['position']}: not in the model's domain")
    return [normalise(stream, r) for r in first.values()]


def reference(landing_messages: list[dict], landing_events: list[dict], as_of: int | None = None) -> dict:
    """Gold of the landing records (rule 23's default `as_of` unless given), plus `as_of`."""
    messages, events = distinct("messages", landing_messages), distinct("workflow_events", landing_events)
    group_pos: dict[tuple, int] = {}
    for e in events:
        if e["type"] == OPEN:
            k = (e["tenant_id"], e["element_instance_key"], e["timestamp"])
            group_pos[k] = min(group_pos.get(k, e["position"]), e["position"])

    def order(item):
        kind, r = item
        if kind == "M":
            return (r["published_at"], 1, r["position"], r["position"])
        if r["type"] == OPEN:
            return (r["timestamp"], 0, group_pos[(r["tenant_id"], r["element_instance_key"], r["timestamp"])],
                    r["position"])
        return (r["timestamp"], 0, r["position"], r["position"])

    items = sorted([("M", m) for m in messages] + [("W", e) for e in events], key=order)
    st = _State()
    i = 0
    while i < len(items):
        kind, r = items[i]
        if kind == "M":
            st.publish(r)
            i += 1
        elif r["type"] == OPEN:
            g = order(items[i])[:3]
            group = []
            while i < len(items) and items[i][0] == "W" and items[i][1]["type"] == OPEN and order(items[i])[:3] == g:
                group.append(items[i][1])
                i += 1
            st.open_group(group)
        else:
            getattr(st, r["type"].lower())(r)
            i += 1

    if as_of is None:
        as_of = max([m["published_at"] for m in messages] + [e["timestamp"] for e in events], default=0)
    out_messages = []
    for m in st.msgs:
        count = sum(1 for c in st.correlations if c["message_key"] == m["position"])
        if m["dup_of"] is not None:
            status = "REJECTED_DUPLICATE"
        elif count:
            status = "CORRELATED"
        elif m["ttl_ms"] > 0 and m["published_at"] + m["ttl_ms"] > as_of:
            status = "BUFFERED"
        else:
            status = "EXPIRED"
        out_messages.append({"message_key": m["position"], "tenant_id": m["tenant_id"], "name": m["name"],
                             "correlation_key": m["correlation_key"], "message_id": m["message_id"],
                             "ttl_ms": m["ttl_ms"], "published_at": m["published_at"],
                             "deadline": m["published_at"] + m["ttl_ms"], "status": status,
                             "duplicate_of": m["dup_of"], "correlation_count": count, "variables": m["variables"]})
    return {
        "as_of": as_of,
        "correlations": st.correlations,
        "messages": out_messages,
        "subscriptions": [{k: v for k, v in s.items() if not k.startswith("_")} for s in st.subs],
        "message_started_instances": [{k: v for k, v in i.items() if not k.startswith("_")}
                                      for i in st.instances],
    }


class _State:
    def __init__(self):
        self.msgs, self.subs, self.instances, self.correlations = [], [], [], []
        self.left, self.ended, self.end_seen, self.held = set(), set(), set(), set()
        self.deployed, self.locks = {}, {}

    # -- helpers
    @staticmethod
    def buffered(m, t):
        return m["dup_of"] is None and m["ttl_ms"] > 0 and m["published_at"] + m["ttl_ms"] > t

    def open_subs(self, tenant, name, key, process=None):
        return [s for s in self.subs if s["_open"] and s["tenant_id"] == tenant and s["message_name"] == name
                and s["correlation_key"] == key and (process is None or s["bpmn_process_id"] == process)]

    def close(self, s, t, reason):
        if s["_open"]:
            s.update(_open=False, closed_at=t, close_reason=reason)

    def record(self, m, t, process, version, pik, eik, element_id, kind):
        m["_procs"].add(process)
        self.correlations.append({
            "message_key": m["position"], "tenant_id": m["tenant_id"], "message_name": m["name"],
            "correlation_key": m["correlation_key"], "bpmn_process_id": process, "process_version": version,
            "process_instance_key": pik, "element_instance_key": eik, "element_id": element_id,
            "subscription_type": kind, "correlated_at": t, "message_published_at": m["published_at"],
            "variables": m["variables"]})

    # -- rules
    def publish(self, r):
        t = r["published_at"]
        m = dict(r, dup_of=None, _procs=set())
        if r["message_id"]:
            for old in self.msgs:
                if (old["tenant_id"], old["name"], old["correlation_key"], old["message_id"]) == \
                        (r["tenant_id"], r["name"], r["correlation_key"], r["message_id"]) and self.buffered(old, t):
                    m["dup_of"] = old["position"]
        self.msgs.append(m)
        if m["dup_of"] is not None:
            return
        took = []
        subs = self.open_subs(m["tenant_id"], m["name"], m["correlation_key"])
        for process in sorted({s["bpmn_process_id"] for s in subs}):
            first = min((s for s in subs if s["bpmn_process_id"] == process),
                        key=lambda s: (s["opened_at"], s["_pos"]))
            self.correlate(first, m, t)
            if not first["interrupting"]:
                took.append(first)
        for (tenant, process), (version, names) in sorted(self.deployed.items()):
            if tenant == m["tenant_id"] and m["name"] in names and process not in m["_procs"]:
                self.try_start(process, m, t)
        for s in took:
            self.pull(s, t)

    def correlate(self, s, m, t):
        self.record(m, t, s["bpmn_process_id"], s["process_version"], s["process_instance_key"],
                    s["element_instance_key"], s["element_id"], "CATCH")
        s["correlation_count"] += 1
        if not s["interrupting"]:
            return
        self.close(s, t, "CORRELATED")
        same_owner = [o for o in self.subs if o["tenant_id"] == s["tenant_id"]
                      and o["element_instance_key"] == s["element_instance_key"]]
        if s["element_type"] == "EVENT_SUBPROCESS":
            for o in same_owner:
                if o["element_type"] == "EVENT_SUBPROCESS":
                    self.close(o, t, "SIBLING_CORRELATED")
        else:
            for o in same_owner:
                self.close(o, t, "SIBLING_CORRELATED")
            self.left.add((s["tenant_id"], s["element_instance_key"]))

    def pull(self, s, t):
        while s["_open"]:
            cands = [m for m in self.msgs if m["tenant_id"] == s["tenant_id"] and m["name"] == s["message_name"]
                     and m["correlation_key"] == s["correlation_key"] and self.buffered(m, t)
                     and s["bpmn_process_id"] not in m["_procs"]]
            if not cands:
                return
            self.correlate(s, min(cands, key=lambda m: (m["published_at"], m["position"])), t)
            if s["interrupting"]:
                return

    def open_group(self, group):
        opened = []
        for e in group:
            tenant = e["tenant_id"]
            if any(s["tenant_id"] == tenant and s["element_instance_key"] == e["element_instance_key"]
                   and s["message_name"] == e["message_name"] for s in self.subs):
                continue
            if (tenant, e["element_instance_key"]) in self.left or (tenant, e["process_instance_key"]) in self.ended:
                continue
            s = {k: e[k] for k in ("tenant_id", "element_instance_key", "message_name", "bpmn_process_id",
                                   "process_version", "process_instance_key", "element_id", "element_type",
                                   "correlation_key", "interrupting")}
            s.update(opened_at=e["timestamp"], closed_at=None, close_reason=None, correlation_count=0,
                     _open=True, _pos=e["position"])
            self.subs.append(s)
            opened.append(s)
        for s in opened:
            if s["_open"]:
                self.pull(s, s["opened_at"])

    def element_left(self, e):
        self.left.add((e["tenant_id"], e["element_instance_key"]))
        for s in self.subs:
            if s["tenant_id"] == e["tenant_id"] and s["element_instance_key"] == e["element_instance_key"]:
                self.close(s, e["timestamp"], "ELEMENT_LEFT")

    def instance_ended(self, e):
        key = (e["tenant_id"], e["process_instance_key"])
        if key in self.end_seen:
            return
        self.end_seen.add(key)
        if key[1].startswith("msg-start:") and not self.instance(*key):
            self.held.add(key)
            return
        self.end(key, e["timestamp"])

    def instance(self, tenant, pik):
        return next((i for i in self.instances if i["tenant_id"] == tenant and i["process_instance_key"] == pik), None)

    def end(self, key, t):
        self.ended.add(key)
        for s in self.subs:
            if (s["tenant_id"], s["process_instance_key"]) == key:
                self.close(s, t, "INSTANCE_ENDED")
        inst = self.instance(*key)
        if inst is None:
            return
        inst["ended_at"] = t
        lock = (key[0], inst["bpmn_process_id"], inst["correlation_key"])
        if self.locks.get(lock) == key[1]:
            del self.locks[lock]
            names = self.deployed.get((key[0], inst["bpmn_process_id"]), (None, ()))[1]
            cands = [m for m in self.msgs if m["tenant_id"] == key[0] and m["correlation_key"] == lock[2]
                     and m["name"] in names and self.buffered(m, t) and lock[1] not in m["_procs"]]
            if cands:
                self.try_start(lock[1], min(cands, key=lambda m: (m["published_at"], m["position"])), t)

    def process_deployed(self, e):
        self.deployed[(e["tenant_id"], e["bpmn_process_id"])] = (e["process_version"], set(e["message_start_events"]))

    def try_start(self, process, m, t):
        tenant, key = m["tenant_id"], m["correlation_key"]
        if key != "" and (tenant, process, key) in self.locks:
            return
        version = self.deployed[(tenant, process)][0]
        pik = f"msg-start:{process}:{m['position']}"
        self.record(m, t, process, version, pik, None, None, "START")
        self.instances.append({"process_instance_key": pik, "tenant_id": tenant, "bpmn_process_id": process,
                               "process_version": version, "message_key": m["position"], "correlation_key": key,
                               "started_at": t, "ended_at": None})
        if key != "":
            self.locks[(tenant, process, key)] = pik
        if (tenant, pik) in self.held:
            self.held.discard((tenant, pik))
            self.end((tenant, pik), t)
