"""The stories `correlake explain` tells: what happened to a message or a subscription and to
what matches it (the same tenant, name and key), in the total order (semantics rule 2: at one
instant, workflow events before messages), then its reason and near misses."""

from __future__ import annotations

from datetime import datetime

from correlake.analysis import audit

WORKFLOW, MESSAGE = 0, 1  # stream ranks of the total order


class Stories:
    """The gold rows around the selected messages and subscriptions, read once (filtered on
    their tenants, names and keys), and the story of each."""

    def __init__(self, rows, messages: list[dict], subscriptions: list[dict], sibling_takes: list[dict],
                 differences: list[dict]):
        triples = sorted({(m["tenant_id"], m["name"], m["correlation_key"]) for m in messages}
                         | {(s["tenant_id"], s["message_name"], s["correlation_key"]) for s in subscriptions})

        def on(name_column: str | None) -> list[dict]:
            return [{"tenant_id": t, **({name_column: n} if name_column else {}), "correlation_key": k}
                    for t, n, k in triples]

        self.messages = rows("gold_messages", on("name"))
        self.subscriptions = rows("gold_subscriptions", on("message_name"))
        self.correlations = rows("gold_correlations", on("message_name"))
        self.instances = rows("gold_message_started_instances", on(None))  # the start-event lock's holders
        self.starting = {(d["tenant_id"], d["bpmn_process_id"], name)  # which processes a name can start
                         for d in rows("silver_deployments", [{"tenant_id": t} for t in {t for t, _, _ in triples}])
                         for name in d["message_start_events"] or ()}
        self.as_of = rows("gold_as_of", [{}])[0]["as_of"]
        self.sibling_takes = sibling_takes  # the correlations that closed subscriptions as SIBLING_CORRELATED
        self.differences = differences  # the messages' rows of engine_differences (a lake of exporter records)

    def tell(self, obj: dict, result: dict) -> str:
        """The object's story, one event a line, then its reason and near misses."""
        if result["kind"] == "MESSAGE":
            title, events, status = self._message(obj)
        else:
            title, events, status = self._subscription(obj)
        lines = [title, *(f"  {_time(at)}  {text}" for at, _, text in sorted(events, key=lambda e: e[:2])),
                 f"  as of {_time(self.as_of)}: {status}", f"  reason: {_reason(result)}"]
        lines += [f"  near miss ({m['miss']}): {_other(m)}" for m in result["near_misses"]]
        if result["kind"] == "MESSAGE":
            lines += [_difference(d) for d in self.differences
                      if (d["tenant_id"], d["message_key"]) == (obj["tenant_id"], obj["message_key"])]
        return "\n".join(lines)

    def _message(self, m: dict):
        key = m["message_key"]
        title = (f"message {key} (tenant {m['tenant_id']}, name {m['name']!r}, "
                 f"correlation key {m['correlation_key']!r})")
        events = [(m["published_at"], MESSAGE, f"published, ttl {m['ttl_ms']} ms" + _buffered(m))]
        for s in self._matching_subscriptions(m):
            events += self._subscription_events(s, skip=key)
        for c in self.correlations:
            if c["message_key"] == key:
                events.append((c["correlated_at"], MESSAGE, f"correlated: {_correlation(c)}"))
        for i in self.instances:  # the lock's holders on its key, of processes that a message of its name starts
            if i["tenant_id"] == m["tenant_id"] and i["correlation_key"] == m["correlation_key"] and \
                    i["message_key"] != key and m["correlation_key"] != "" and \
                    (i["tenant_id"], i["bpmn_process_id"], m["name"]) in self.starting:
                events.append((i["started_at"], MESSAGE, f"instance {i['process_instance_key']} of "
                               f"{i['bpmn_process_id']} started by message {i['message_key']} (holds the lock)"))
                if i["ended_at"] is not None:
                    events.append((i["ended_at"], WORKFLOW, f"instance {i['process_instance_key']} ended"))
        return title, events, m["status"]

    def _subscription(self, s: dict):
        title = (f"subscription {s['element_instance_key']} to {s['message_name']!r} (tenant {s['tenant_id']}, "
                 f"correlation key {s['correlation_key']!r})")
        events = [(c["correlated_at"], WORKFLOW, f"its sibling subscription to {c['message_name']!r} took message "
                   f"{c['message_key']} (rule 13)") for c in self.sibling_takes
                  if (c["tenant_id"], c["element_instance_key"]) == (s["tenant_id"], s["element_instance_key"])
                  and c["message_name"] != s["message_name"] and c["correlated_at"] == s["closed_at"]]
        events += self._subscription_events(s)  # at one instant, after the sibling's take (the order is stable)
        for m in self.messages:
            if (m["tenant_id"], m["name"], m["correlation_key"]) == _triple(s):
                events.append((m["published_at"], MESSAGE, f"message {m['message_key']} published, ttl "
                               f"{m['ttl_ms']} ms" + _buffered(m)))
                events += [(c["correlated_at"], MESSAGE, f"message {m['message_key']} correlated: {_correlation(c)}")
                           for c in self.correlations if c["message_key"] == m["message_key"]
                           and c["element_instance_key"] != s["element_instance_key"]]
        still_open = s["closed_at"] is None or s["closed_at"] > self.as_of
        return title, events, "open" if still_open else f"closed ({s['close_reason']})"

    def _matching_subscriptions(self, m: dict) -> list[dict]:
        return [s for s in self.subscriptions if _triple(s) == (m["tenant_id"], m["name"], m["correlation_key"])]

    def _subscription_events(self, s: dict, skip: int | None = None) -> list[tuple]:
        """A subscription's opening, what it took (but message `skip`), and its close."""
        who = (f"subscription {s['element_instance_key']} ({s['element_type']} of {s['bpmn_process_id']} "
               f"v{s['process_version']}, instance {s['process_instance_key']})")
        events = [(s["opened_at"], WORKFLOW, f"{who} opened")]
        events += [(c["correlated_at"], WORKFLOW, f"{who} took message {c['message_key']}")
                   for c in self.correlations if c["subscription_type"] == "CATCH" and c["message_key"] != skip
                   and (c["tenant_id"], c["element_instance_key"], c["message_name"]) ==
                   (s["tenant_id"], s["element_instance_key"], s["message_name"])]
        if s["closed_at"] is not None:
            events.append((s["closed_at"], WORKFLOW, f"{who} closed ({s['close_reason']})"))
        return events


def _triple(s: dict) -> tuple:
    return s["tenant_id"], s["message_name"], s["correlation_key"]


def _buffered(m: dict) -> str:
    if m["duplicate_of"] is not None:
        return f"; rejected as a duplicate of message {m['duplicate_of']} (rule 7)"
    if m["ttl_ms"] == 0:
        return "; offered only at its publish (rule 6)"
    return f"; buffered until {_time(m['deadline'])}"


def _correlation(c: dict) -> str:
    where = (f"subscription {c['element_instance_key']}" if c["subscription_type"] == "CATCH"
             else "a message start event")
    return f"{c['bpmn_process_id']} v{c['process_version']} through {where}, instance {c['process_instance_key']}"


def _reason(r: dict) -> str:
    if r["reason"] is None:
        return "none: it correlated"
    related = [f"message {r['related_message_key']}" if r["related_message_key"] is not None else None,
               f"subscription {r['related_element_instance_key']}"
               if r["related_element_instance_key"] is not None else None,
               f"gap {r['gap_ms']} ms" if r["gap_ms"] is not None else None]
    named = ", ".join(filter(None, related))
    return r["reason"] + (f" ({named})" if named else "")


def _difference(d: dict) -> str:
    """A line on where the engine correlated the message otherwise (a row of engine_differences)."""
    why = f", {d['explanation']}" if d["explanation"] else ""
    sides = "; ".join(f"{side} {audit.target(d, side)}" for side in audit.SIDES)
    return f"  the engine differs ({d['difference']}{why}) on {d['bpmn_process_id']}: {sides} (`correlake audit`)"


def _other(m: dict) -> str:
    which = (f"message {m['other_message_key']}" if m["other_kind"] == "MESSAGE"
             else f"subscription {m['other_element_instance_key']}")
    return (f"{which} of tenant {m['other_tenant_id']}, name {m['other_name']!r}, "
            f"correlation key {m['other_correlation_key']!r}")


def _time(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
