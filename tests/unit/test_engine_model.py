"""The engine (pure Python, one partition per tenant) against the reference model."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlake.semantics.uniqueness import dedup_messages
from correlake.semantics import order
from correlake.semantics.engine import correlate_partition
from generators import START_EVENTS, streams
from helpers import parsed
from reference_model import reference


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


def canon(rows: list[dict]) -> list:
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


@settings(max_examples=1600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(streams(), streams(profile=START_EVENTS)))
def test_engine_matches_reference(case):
    messages = parsed("messages", case["messages"])
    events = parsed("workflow_events", case["workflow_events"])
    want = reference(messages, events)
    got = engine_gold(messages, events)
    for table in ("correlations", "subscriptions", "message_started_instances"):
        assert canon(got[table]) == canon(want[table]), table
    assert got["duplicate_of"] == {m["message_key"]: m["duplicate_of"] for m in want["messages"]}
