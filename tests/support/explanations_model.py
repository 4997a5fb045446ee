"""The views `explanations` and `near_misses` (contract, *Explanations*) computed from the
reference model's gold (`reference_model.reference`, times in epoch millis) and the landing's
workflow events (the deployments in force at a publish, rule 18), independently of the
product's SQL. `explanations` gives each object of no correlation the first reason that
applies in the contract's order, with its related object and `gap_ms`; `near_misses` the
view's rows for those objects; `problems` what differs between the views of a lake and them.

"Matching": the same tenant, name and correlation key. "First" is the earliest in time; the
contract leaves ties at one millisecond open and the model breaks them as docs/analysts.md
says the views do: a subscription by `element_instance_key`, a message by `message_key`,
a lock by `bpmn_process_id`, near misses by the other side's tenant, name, key and its own key."""

from __future__ import annotations

from collections import defaultdict

from .reference_model import distinct

COLUMNS = ("kind", "tenant_id", "message_key", "element_instance_key", "message_name", "reason",
           "related_message_key", "related_element_instance_key", "gap_ms")
NEAR_MISS_COLUMNS = ("kind", "tenant_id", "message_key", "element_instance_key", "message_name", "miss",
                     "other_kind", "other_tenant_id", "other_name", "other_correlation_key", "other_message_key",
                     "other_element_instance_key")
MAX_NEAR_MISSES = 10
WHITE_SPACE = " \t\n\r\f\v"


def _buffered_at_open(m: dict, opened_at: int) -> bool:
    """Rule 6, at a workflow event's instant: published before it (at one millisecond the
    workflow event comes first, rule 2) and still buffered then."""
    return m["ttl_ms"] > 0 and m["published_at"] < opened_at < m["deadline"]


def _deployments(events: list[dict]) -> dict[tuple, list[tuple]]:
    """(tenant, process) -> its PROCESS_DEPLOYED records as (timestamp, position, start event names)."""
    out = defaultdict(list)
    for e in distinct("workflow_events", events):
        if e["type"] == "PROCESS_DEPLOYED":
            out[(e["tenant_id"], e["bpmn_process_id"])].append((e["timestamp"], e["position"],
                                                               set(e["message_start_events"])))
    return out


def _lock_holder(m: dict, gold: dict, deployments: dict) -> int | None:
    """Reason 2: the message key of the instance whose lock kept `m` from starting a process
    whose latest deployment at its publish starts on its name (rules 18-19), held from before
    its publish until it left the buffer or still; of several processes, the first."""
    if m["correlation_key"] == "":
        return None
    published = {x["message_key"]: x["published_at"] for x in gold["messages"]}
    place = (m["published_at"], 1, m["message_key"])  # its place in the total order
    holders = []
    for (tenant, process), deploys in deployments.items():
        latest = max((d for d in deploys if d[0] <= m["published_at"]), default=None, key=lambda d: d[:2])
        if tenant != m["tenant_id"] or latest is None or m["name"] not in latest[2]:
            continue  # no start event of its name at its publish: workflow events of its instant come first
        for i in gold["message_started_instances"]:
            # started at its message's publish (ordered by the message's position) or at a lock's release
            started = (i["started_at"], 1, i["message_key"]) if published[i["message_key"]] == i["started_at"] \
                else (i["started_at"], 0, 0)
            if (i["tenant_id"], i["bpmn_process_id"], i["correlation_key"]) == (tenant, process, m["correlation_key"]) \
                    and started < place and (i["ended_at"] is None or (i["ended_at"] > m["published_at"]
                                                                        and i["ended_at"] >= m["deadline"])):
                holders.append((process, i["message_key"]))
    return min(holders)[1] if holders else None


def _message_reason(m: dict, gold: dict, deployments: dict) -> tuple:
    """(reason, related message, related subscription, gap_ms) of an unmatched message."""
    subs = [s for s in gold["subscriptions"]
            if (s["tenant_id"], s["message_name"], s["correlation_key"]) ==
            (m["tenant_id"], m["name"], m["correlation_key"])]
    if m["duplicate_of"] is not None:
        return "DUPLICATE", m["duplicate_of"], None, None
    holder = _lock_holder(m, gold, deployments)
    if holder is not None:
        return "START_LOCKED", holder, None, None
    took = [(s["opened_at"], s["element_instance_key"], c["message_published_at"], c["message_key"])
            for s in subs if _buffered_at_open(m, s["opened_at"]) for c in gold["correlations"]
            if c["subscription_type"] == "CATCH" and (c["tenant_id"], c["element_instance_key"], c["message_name"])
            == (s["tenant_id"], s["element_instance_key"], s["message_name"])
            and (c["message_published_at"], c["message_key"]) < (m["published_at"], m["message_key"])]
    if took:
        _, element, _, taken = min(took)
        return "TAKEN_BY_EARLIER", taken, element, None
    if m["status"] == "BUFFERED":
        return "WAITING", None, None, None
    after = [(s["opened_at"], s["element_instance_key"]) for s in subs if s["opened_at"] >= m["deadline"]]
    if after:
        opened_at, element = min(after)
        return "SUBSCRIPTION_AFTER_DEADLINE", None, element, opened_at - m["deadline"]
    closed = [(s["closed_at"], s["element_instance_key"]) for s in subs
              if s["closed_at"] is not None and s["closed_at"] <= m["published_at"]]
    if closed:
        closed_at, element = max(closed)
        return "SUBSCRIPTION_CLOSED_BEFORE", None, element, m["published_at"] - closed_at
    return ("NO_SUBSCRIPTION" if not subs else None), None, None, None


def _subscription_reason(s: dict, gold: dict) -> tuple:
    """(reason, related message, related subscription, gap_ms) of a subscription that took
    nothing. A rejected duplicate never buffers (rule 7): the messages are the accepted ones
    (its original matches as it does, and comes first)."""
    messages = [m for m in gold["messages"] if m["duplicate_of"] is None
                and (m["tenant_id"], m["name"], m["correlation_key"]) ==
                (s["tenant_id"], s["message_name"], s["correlation_key"])]
    closed_at = s["closed_at"]
    if s["close_reason"] == "SIBLING_CORRELATED":
        return "SIBLING_CORRELATED", None, None, None
    to_its_process = {c["message_key"] for c in gold["correlations"] if c["bpmn_process_id"] == s["bpmn_process_id"]}
    taken = [(m["published_at"], m["message_key"]) for m in messages if m["message_key"] in to_its_process
             and (_buffered_at_open(m, s["opened_at"])
                  or s["opened_at"] <= m["published_at"] and (closed_at is None or m["published_at"] < closed_at))]
    if taken:
        return "TAKEN_BY_PROCESS", min(taken)[1], None, None
    expired = [(m["deadline"], m["message_key"]) for m in messages if m["deadline"] <= s["opened_at"]]
    if expired:
        deadline, key = max(expired)
        return "MESSAGE_EXPIRED_BEFORE_OPEN", key, None, s["opened_at"] - deadline
    if closed_at is None or closed_at > gold["as_of"]:
        return "WAITING", None, None, None
    after = [(m["published_at"], m["message_key"]) for m in messages if m["published_at"] >= closed_at]
    if after:
        published_at, key = min(after)
        return "MESSAGE_AFTER_CLOSE", key, None, published_at - closed_at
    return ("NO_MESSAGE" if not messages else None), None, None, None


def explanations(gold: dict, events: list[dict]) -> list[dict]:
    """The rows of the view `explanations` for the reference `gold` of a landing whose
    workflow events are `events`."""
    deployments = _deployments(events)
    rows = []
    for m in gold["messages"]:
        if m["correlation_count"] == 0:
            why = _message_reason(m, gold, deployments)
            rows.append(dict(zip(COLUMNS, ("MESSAGE", m["tenant_id"], m["message_key"], None, None, *why))))
    for s in gold["subscriptions"]:
        if s["correlation_count"] == 0:
            why = _subscription_reason(s, gold)
            rows.append(dict(zip(COLUMNS, ("SUBSCRIPTION", s["tenant_id"], None, s["element_instance_key"],
                                           s["message_name"], *why))))
    return rows


def _folded(text: str) -> str:
    return text.strip(WHITE_SPACE).lower()


def _miss(a: dict, b: dict) -> str | None:
    """How records `a` and `b` (tenant, name, key) differ in one way only, if they do."""
    if a["tenant_id"] == b["tenant_id"] and a["name"] == b["name"] and a["key"] != b["key"] \
            and _folded(a["key"]) == _folded(b["key"]):
        return "KEY_CASE_OR_SPACE"
    if a["tenant_id"] == b["tenant_id"] and a["key"] == b["key"] and a["name"] != b["name"] \
            and _folded(a["name"]) == _folded(b["name"]):
        return "NAME_CASE_OR_SPACE"
    if a["tenant_id"] != b["tenant_id"] and a["name"] == b["name"] and a["key"] == b["key"]:
        return "OTHER_TENANT"
    return None


def near_misses(gold: dict, explained: list[dict]) -> list[dict]:
    """The rows of the view `near_misses` for the `explained` objects (rows of `explanations`),
    each object's in order: the closest in time (publish, opening) first, at most ten."""
    records = [{"kind": "MESSAGE", "tenant_id": m["tenant_id"], "message_key": m["message_key"],
                "element_instance_key": None, "name": m["name"], "key": m["correlation_key"], "at": m["published_at"]}
               for m in gold["messages"]]
    records += [{"kind": "SUBSCRIPTION", "tenant_id": s["tenant_id"], "message_key": None,
                 "element_instance_key": s["element_instance_key"], "name": s["message_name"],
                 "key": s["correlation_key"], "at": s["opened_at"]} for s in gold["subscriptions"]]
    identity = {(r["kind"], r["tenant_id"], r["message_key"], r["element_instance_key"],
                 r["name"] if r["kind"] == "SUBSCRIPTION" else None): r for r in records}
    alike = defaultdict(list)  # a near miss has the same name and key once both are folded
    for r in records:
        alike[(_folded(r["name"]), _folded(r["key"]))].append(r)
    rows = []
    for e in explained:
        me = identity[tuple(e[c] for c in COLUMNS[:5])]
        found = [(abs(o["at"] - me["at"]), o["tenant_id"], o["name"], o["key"], o["message_key"] or 0,
                  o["element_instance_key"] or "", miss, o)
                 for o in alike[(_folded(me["name"]), _folded(me["key"]))]
                 if o["kind"] != me["kind"] and (miss := _miss(me, o))]
        for *_, miss, o in sorted(found, key=lambda f: f[:6])[:MAX_NEAR_MISSES]:
            rows.append(dict(zip(NEAR_MISS_COLUMNS, (*(e[c] for c in COLUMNS[:5]), miss, o["kind"], o["tenant_id"],
                                                     o["name"], o["key"], o["message_key"],
                                                     o["element_instance_key"]))))
    return rows


def _differences(what: str, got: list[dict], want: list[dict], key) -> list[str]:
    by_key = defaultdict(lambda: ([], []))
    for side, rows in enumerate((got, want)):
        for r in rows:
            by_key[key(r)][side].append(r)
    return [f"{what} {k}: the view has {g}, the model {w}" for k, (g, w) in by_key.items() if g != w]


def problems(spark, lake: str, gold: dict, events: list[dict]) -> list[str]:
    """How the views `explanations` and `near_misses` of `lake` differ from the model's rows
    for the reference `gold` of its records (empty: equal, every column, each object's near
    misses in order)."""
    from correlake.lake import catalog

    catalog.register(spark, lake, ["explanations near_misses"])
    got = [r.asDict() for r in spark.sql("SELECT * FROM explanations").collect()]
    want = explanations(gold, events)
    found = _differences("explanation of", got, want, lambda r: tuple(r[c] for c in COLUMNS[:5]))
    got_misses = [r.asDict() for r in spark.sql("SELECT * FROM near_misses").collect()]
    found += _differences("near misses of", got_misses, near_misses(gold, want),
                          lambda r: tuple(r[c] for c in COLUMNS[:5]))
    return found
