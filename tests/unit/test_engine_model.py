"""The engine (pure Python, one partition per tenant) against the reference model.

Seeded from CORRELAKE_TEST_SEED (generators.SEED); a failure also prints Hypothesis's
`@reproduce_failure` blob, which replays it exactly."""

from __future__ import annotations

import duckdb
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st
from support.generators import SEED, START_EVENTS, streams
from support.helpers import canonical_rows, parsed
from support.reference_model import reference

from correlake.lake.sqlfiles import fill
from correlake.semantics import order
from correlake.semantics.engine import correlate_partition
from correlake.semantics.uniqueness import dedup_messages


def engine_gold(messages: list[dict], events: list[dict]) -> dict:
    """Run dedup + engine per tenant, without Spark (the Spark path is tested elsewhere)."""
    out = {"correlations": [], "subscriptions": [], "message_started_instances": [], "duplicate_of": {}}
    for tenant in sorted({r["tenant_id"] for r in messages + events}):
        ms = sorted((m for m in messages if m["tenant_id"] == tenant), key=lambda m: (m["published_at"], m["position"]))
        dup = {}
        for key in {m["correlation_key"] for m in ms}:
            dup.update(dedup_messages([m for m in ms if m["correlation_key"] == key]))
        out["duplicate_of"].update(dup)
        evs = [dict(kind=order.MESSAGE_PUBLISHED, t=m["published_at"], accepted=dup[m["position"]] is None, **m)
               for m in ms]
        ws = [w for w in events if w["tenant_id"] == tenant]
        group_position = {}  # rule 3
        for w in ws:
            if w["type"] == order.SUBSCRIPTION_OPENED:
                k = (w["element_instance_key"], w["timestamp"])
                group_position[k] = min(group_position.get(k, w["position"]), w["position"])
        deployments = sorted((dict(w, t=w["timestamp"]) for w in ws if w["type"] == order.PROCESS_DEPLOYED),
                             key=order.deployment_sort_key)
        for w in ws:
            if w["type"] != order.PROCESS_DEPLOYED:
                opened = w["type"] == order.SUBSCRIPTION_OPENED
                evs.append(dict(w, kind=w["type"], t=w["timestamp"], group_position=group_position[
                    (w["element_instance_key"], w["timestamp"])] if opened else w["position"]))
        evs.sort(key=order.record_sort_key)
        got = correlate_partition(tenant, evs, deployments)
        for table in ("correlations", "subscriptions", "message_started_instances"):
            out[table] += got[table]
    return out


DB = duckdb.connect()


def statuses(messages: list[dict], duplicate_of: dict, correlations: list[dict], as_of: int) -> dict:
    """message_key -> status: the product's rule-23 expression (sql/message_status.sql) over the engine's output."""
    if not messages:
        return {}
    def sql(value) -> str:
        return "NULL" if value is None else str(value)

    rows = ", ".join(f"({m['position']}, {sql(duplicate_of[m['position']])}, "
                     f"{sum(c['message_key'] == m['position'] for c in correlations)}, {m['ttl_ms']}, "
                     f"{m['published_at'] + m['ttl_ms']}, {as_of})" for m in messages)
    return dict(DB.execute(f"SELECT message_key, {fill('message_status')} FROM (VALUES {rows}) "
                           "AS m(message_key, duplicate_of, correlation_count, ttl_ms, deadline, as_of)").fetchall())


@seed(SEED)
@settings(max_examples=1600, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(streams(), streams(profile=START_EVENTS)))
def test_engine_matches_reference(case):
    note(f"CORRELAKE_TEST_SEED={SEED}")
    want = reference(case["messages"], case["workflow_events"])  # the model reads the landing records itself
    messages, events = parsed("messages", case["messages"]), parsed("workflow_events", case["workflow_events"])
    got = engine_gold(messages, events)
    for table in ("correlations", "subscriptions", "message_started_instances"):
        assert canonical_rows(got[table]) == canonical_rows(want[table]), table
    assert got["duplicate_of"] == {m["message_key"]: m["duplicate_of"] for m in want["messages"]}
    assert statuses(messages, got["duplicate_of"], got["correlations"], want["as_of"]) == \
        {m["message_key"]: m["status"] for m in want["messages"]}
