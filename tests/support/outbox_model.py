"""The outbox (delivery/outbox, contract *Delivery*) read and checked: its live events
against gold's correlations, and each retraction against the late input that explains it."""

from __future__ import annotations

import json
from collections import Counter

from correlake.contract.schemas import GOLD_TIMES, STREAM_TIME

from .helpers import iso_to_millis, millis_to_iso, read_gold
from .lake_rows import table_rows
from .reference_model import distinct

EVENT_FIELDS = ("event_id", "kind", "ordering_key", "sequence", "partition")


def read_outbox(lake: str, version: int | None = None) -> list[dict]:
    """The outbox's rows (at `version`, else the latest), each with its payload parsed; read
    with delta-rs (times as epoch millis)."""
    return [dict(r, payload=json.loads(r["payload"])) for r in table_rows(lake, "outbox", version=version)]


def live_correlations(events: list[dict]) -> list[tuple]:
    """The correlations the outbox's live events carry (CORRELATED minus RETRACTED, by
    payload), as `canonical_rows`; fails if any is retracted more often than correlated."""
    counts = Counter()
    for e in events:
        correlation = tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in e["payload"].items()
                                   if k not in EVENT_FIELDS))
        counts[correlation] += 1 if e["kind"] == "CORRELATED" else -1
    assert all(n in (0, 1) for n in counts.values()), [c for c, n in counts.items() if n not in (0, 1)][:3]
    return sorted((c for c, n in counts.items() if n == 1), key=repr)


def correlation_text(event: dict) -> str:
    """The correlation an event carries, as canonical JSON (its payload less the event's fields)."""
    return json.dumps({k: v for k, v in event["payload"].items() if k not in EVENT_FIELDS}, sort_keys=True)


def live_event_ids(events: list[dict]) -> set[str]:
    """The ids of the live CORRELATED events: of each correlation (payload), its latest
    CORRELATED event unless a RETRACTED one follows it."""
    live = {}
    for e in sorted(events, key=lambda e: e["sequence"]):
        correlation = correlation_text(e)
        if e["kind"] == "CORRELATED":
            live[correlation] = e["event_id"]
        else:
            live.pop(correlation, None)
    return set(live.values())


def gold_as_events(gold_correlations: list[dict]) -> list[tuple]:
    """gold/correlations rows (`read_gold`) as the outbox's payloads carry them."""
    def value(k, v):
        if k in GOLD_TIMES["correlations"] and v is not None:
            return json.dumps(millis_to_iso(v))
        return json.dumps(json.loads(v) if k == "variables" and v is not None else v, sort_keys=True)

    return sorted((tuple(sorted((k, value(k, v)) for k, v in r.items())) for r in gold_correlations), key=repr)


def assert_outbox_agrees(lake: str) -> list[dict]:
    """`assert_events_agree` on the lake's outbox and gold, read with delta-rs. Returns the events."""
    return assert_events_agree(read_outbox(lake), read_gold(lake)["correlations"])


def assert_events_agree(events: list[dict], gold_correlations: list[dict]) -> list[dict]:
    """The outbox's live events are exactly gold's correlations (`read_gold`'s rows); each
    ordering key (the correlation key, `#<message_key>` for an empty one) has sequences 1..n
    and one partition; event ids are unique. Returns the events."""
    assert live_correlations(events) == gold_as_events(gold_correlations)
    assert len({e["event_id"] for e in events}) == len(events)
    by_key: dict[tuple, list[dict]] = {}
    for e in events:
        assert e["ordering_key"] == (e["correlation_key"] or f"#{e['message_key']}"), e
        by_key.setdefault((e["tenant_id"], e["ordering_key"]), []).append(e)
    for key, key_events in by_key.items():
        assert sorted(e["sequence"] for e in key_events) == list(range(1, len(key_events) + 1)), key
        assert len({e["partition"] for e in key_events}) == 1, key
    for e in events:
        assert {k: e["payload"][k] for k in EVENT_FIELDS} == {k: e[k] for k in EVENT_FIELDS}
    return events


def first_arrivals(runs: list[dict[str, list[dict]]]) -> list[set[tuple[str, int]]]:
    """For each run (its landing records by stream), the (tenant, event time) of the records
    that arrive in it first: a record of a position an earlier run brought is a replay."""
    seen: set[tuple[str, int]] = set()
    arrived = []
    for records in runs:
        new = set()
        for stream, rows in records.items():
            for r in distinct(stream, [r for r in rows if (stream, r["position"]) not in seen]):
                new.add((r["tenant_id"], r[STREAM_TIME[stream]]))
            seen |= {(stream, r["position"]) for r in rows}
        arrived.append(new)
    return arrived


def unexplained_retractions(events: list[dict], arrived: list[set[tuple[str, int]]]) -> list[dict]:
    """The RETRACTED events that no late input explains. Semantics rule 4: a correlation
    made at `correlated_at` is decided by the records before it in the total order (rule 2),
    so a later run restates it only if a record of its tenant (rule 3a) at or before that
    instant arrives after the run that made it (`arrived`: `first_arrivals` by run number).
    `events`' `_run_id` is the number of the run that wrote each."""
    made, unexplained = {}, []
    for e in sorted(events, key=lambda e: (e["tenant_id"], e["ordering_key"], e["sequence"])):
        correlation = correlation_text(e)
        if e["kind"] == "CORRELATED":
            made[correlation] = e["_run_id"]
            continue
        at = iso_to_millis(e["payload"]["correlated_at"])
        if not any(tenant == e["tenant_id"] and time <= at
                   for n in range(made[correlation] + 1, e["_run_id"] + 1) for tenant, time in arrived[n]):
            unexplained.append(dict(e, correlated_in_run=made[correlation]))
    return unexplained
