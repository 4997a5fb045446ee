"""The claims of the view `explanations` (contract revision 3, *Explanations*), stated on the
reference model's gold (`reference_model.reference`), independently of the product's SQL:
`problems(rows, gold)` lists what is wrong with the view's rows for that gold (times in
epoch millis; "matching": the same tenant, name and correlation key).

Each row must be one of the objects that took part in no correlation, each such object
must have exactly one row, and the row's reason must hold in the model's timeline: the
related message or subscription it names exists, matches, and stands where the reason
says (before, after, while buffered), with `gap_ms` the gap it names."""

from __future__ import annotations

from collections import Counter

INF = float("inf")


def _buffered(m: dict, at: int) -> bool:
    """Semantics rule 6: buffered at `at` while it has a TTL and its deadline is later."""
    return m["ttl_ms"] > 0 and m["deadline"] > at and m["published_at"] <= at


def _message_claim(row: dict, m: dict, gold: dict) -> str | None:
    reason, related_m, related_s, gap = (row["reason"], row["related_message_key"],
                                         row["related_element_instance_key"], row["gap_ms"])
    subs = [s for s in gold["subscriptions"] if (s["tenant_id"], s["message_name"], s["correlation_key"])
            == (m["tenant_id"], m["name"], m["correlation_key"])]
    sub = next((s for s in subs if s["element_instance_key"] == related_s), None)
    if reason == "DUPLICATE":
        return None if m["duplicate_of"] is not None and related_m == m["duplicate_of"] else "not a rule-7 duplicate"
    if reason == "START_LOCKED":
        holder = [i for i in gold["message_started_instances"] if i["message_key"] == related_m
                  and i["tenant_id"] == m["tenant_id"] and i["correlation_key"] == m["correlation_key"]
                  and i["started_at"] <= m["published_at"] < (i["ended_at"] or INF)
                  and (i["ended_at"] is None or i["ended_at"] >= m["deadline"])]
        return None if holder else "no instance of its key held the lock from its publish until it left the buffer"
    if reason == "TAKEN_BY_EARLIER":
        took = [c for c in gold["correlations"] if sub is not None and c["message_key"] == related_m
                and c["tenant_id"] == sub["tenant_id"] and c["element_instance_key"] == sub["element_instance_key"]
                and c["message_name"] == sub["message_name"]
                and (c["message_published_at"], c["message_key"]) < (m["published_at"], m["message_key"])]
        opened_while_buffered = sub is not None and _buffered(m, sub["opened_at"])
        return None if took and opened_while_buffered else "its subscription did not open while it was buffered " \
                                                           "and take an earlier message"
    if reason == "WAITING":
        return None if m["status"] == "BUFFERED" else f"not buffered at as_of ({m['status']})"
    if reason == "SUBSCRIPTION_AFTER_DEADLINE":
        open_meanwhile = [s for s in subs if s["opened_at"] < m["deadline"]
                          and (s["closed_at"] is None or s["closed_at"] > m["published_at"])]
        ok = sub is not None and sub["opened_at"] >= m["deadline"] and gap == sub["opened_at"] - m["deadline"]
        return None if ok and not open_meanwhile else "its subscription did not open at or after its deadline, " \
                                                      "or one was open while it was buffered"
    if reason == "SUBSCRIPTION_CLOSED_BEFORE":
        ok = (sub is not None and sub["closed_at"] is not None and sub["closed_at"] <= m["published_at"]
              and gap == m["published_at"] - sub["closed_at"])
        return None if ok else "its subscription did not close at or before its publish"
    if reason == "NO_SUBSCRIPTION":
        return None if not subs else "a matching subscription did open"
    return f"no such reason for a message: {reason}"


def _subscription_claim(row: dict, s: dict, gold: dict) -> str | None:
    reason, related_m, gap = row["reason"], row["related_message_key"], row["gap_ms"]
    messages = [m for m in gold["messages"] if (m["tenant_id"], m["name"], m["correlation_key"])
                == (s["tenant_id"], s["message_name"], s["correlation_key"])]
    m = next((m for m in messages if m["message_key"] == related_m), None)
    if reason == "SIBLING_CORRELATED":
        return None if s["close_reason"] == "SIBLING_CORRELATED" else f"closed {s['close_reason']}"
    if reason == "TAKEN_BY_PROCESS":
        while_open = m is not None and m["published_at"] < (s["closed_at"] or INF) and (
            m["published_at"] >= s["opened_at"] or _buffered(m, s["opened_at"]))
        to_its_process = any(c["message_key"] == related_m and c["bpmn_process_id"] == s["bpmn_process_id"]
                             for c in gold["correlations"])
        return None if while_open and to_its_process else "its message was not there while it was open, or did " \
                                                          "not correlate to its process"
    if reason == "MESSAGE_EXPIRED_BEFORE_OPEN":
        ok = m is not None and m["deadline"] <= s["opened_at"] and gap == s["opened_at"] - m["deadline"]
        return None if ok else "its message had not left the buffer by its opening"
    if reason == "WAITING":
        return None if s["closed_at"] is None else "closed at as_of"
    if reason == "MESSAGE_AFTER_CLOSE":
        ok = (m is not None and s["closed_at"] is not None and m["published_at"] >= s["closed_at"]  # at one instant
              and gap == m["published_at"] - s["closed_at"])  # the close comes first (rule 2)
        return None if ok else "its message was not published after it closed"
    if reason == "NO_MESSAGE":
        return None if not messages else "a matching message was published"
    return f"no such reason for a subscription: {reason}"


def problems(rows: list[dict], gold: dict) -> list[str]:
    """What is wrong with the view's `rows` for the reference `gold` (empty: every claim holds)."""
    messages = {m["message_key"]: m for m in gold["messages"] if m["correlation_count"] == 0}
    subscriptions = {(s["tenant_id"], s["element_instance_key"], s["message_name"]): s
                     for s in gold["subscriptions"] if s["correlation_count"] == 0}
    identity = [("M", r["message_key"]) if r["kind"] == "MESSAGE"
                else ("S", (r["tenant_id"], r["element_instance_key"], r["message_name"])) for r in rows]
    found = [f"{key} has {n} rows" for key, n in Counter(identity).items() if n > 1]
    found += [f"message {k} has no row" for k in messages if ("M", k) not in identity]
    found += [f"subscription {k} has no row" for k in subscriptions if ("S", k) not in identity]
    for row, (kind, key) in zip(rows, identity):
        obj = (messages if kind == "M" else subscriptions).get(key)
        if obj is None:
            found.append(f"{key}: a row for an object that correlated, or none of the model's")
            continue
        wrong = _message_claim(row, obj, gold) if kind == "M" else _subscription_claim(row, obj, gold)
        if wrong:
            found.append(f"{key} {row['reason']}: {wrong} ({row})")
    return found
