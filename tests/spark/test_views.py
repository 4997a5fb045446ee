"""The analyst views of `sql/views/` against the same answers computed here from the gold
rows of a real demo run."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest
from support.helpers import read_gold, write_landing

from correlake.interfaces import cli
from correlake.lake import catalog

HOUR = 3_600_000


@pytest.fixture(scope="module")
def gold(spark, demo_lake):
    catalog.register(spark, demo_lake)
    return read_gold(demo_lake)


def rows(spark, sql: str) -> list[dict]:
    return [r.asDict() for r in spark.sql(sql).collect()]


def test_every_view_has_a_question_and_reads_only_known_names():
    views = catalog.views()
    assert len(views) >= 9
    for view in views.values():
        assert view.question.endswith("?") and len(view.question) > 20
        assert view.reads <= set(catalog.TABLE_NAMES) | set(views)
    order = list(views)
    assert order.index("unmatched_messages") < order.index("unmatched_by_hour")


def test_unmatched_messages_are_the_expired_ones_with_their_listeners(spark, gold):
    listeners = defaultdict(set)
    for s in gold["subscriptions"]:
        listeners[(s["tenant_id"], s["message_name"])].add(s["bpmn_process_id"])
    for c in gold["correlations"]:
        if c["subscription_type"] == "START":
            listeners[(c["tenant_id"], c["message_name"])].add(c["bpmn_process_id"])
    expired = {m["message_key"]: m for m in gold["messages"] if m["status"] == "EXPIRED"}
    got = rows(spark, "SELECT message_key, tenant_id, name, listening_processes FROM unmatched_messages")
    assert expired and {r["message_key"] for r in got} == set(expired)
    for r in got:
        assert r["listening_processes"] == sorted(listeners[(r["tenant_id"], r["name"])])
    per_process = sum(max(1, len(listeners[(m["tenant_id"], m["name"])])) for m in expired.values())
    assert rows(spark, "SELECT sum(expired_messages) AS n FROM unmatched_by_hour")[0]["n"] == per_process


def test_correlation_latency_and_its_percentiles(spark, gold):
    opened = {(s["tenant_id"], s["element_instance_key"], s["message_name"]): s["opened_at"]
              for s in gold["subscriptions"]}
    got = {(r["message_key"], r["bpmn_process_id"]): (r["since_published_s"], r["since_opened_s"])
           for r in rows(spark, "SELECT * FROM correlation_latency")}
    assert len(got) == len(gold["correlations"])
    by_group = defaultdict(list)
    for c in gold["correlations"]:
        since_open = None
        if c["subscription_type"] == "CATCH":
            since_open = (c["correlated_at"] - opened[(c["tenant_id"], c["element_instance_key"],
                                                       c["message_name"])]) / 1000
        since_published = (c["correlated_at"] - c["message_published_at"]) / 1000
        assert got[(c["message_key"], c["bpmn_process_id"])] == (since_published, since_open)
        by_group[(c["bpmn_process_id"], c["message_name"], c["subscription_type"])].append(since_published)
    percentiles = rows(spark, "SELECT * FROM latency_percentiles")
    assert len(percentiles) == len(by_group)
    for r in percentiles:
        values = sorted(by_group[(r["bpmn_process_id"], r["message_name"], r["subscription_type"])])
        assert r["correlations"] == len(values)
        assert r["since_published_p50_s"] == values[math.ceil(0.5 * len(values)) - 1]
        assert r["since_published_max_s"] == values[-1]
    # the demo's START correlations include lock waits: their p99 is far from instant
    start = next(r for r in percentiles if r["subscription_type"] == "START")
    assert start["since_published_max_s"] > 60 and start["since_opened_p50_s"] is None


def test_buffered_backlog_matches_a_count_at_each_hours_end(spark, gold):
    [as_of] = [r["as_of"] for r in gold["as_of"]]
    first = defaultdict(lambda: math.inf)
    for c in gold["correlations"]:
        first[c["message_key"]] = min(first[c["message_key"]], c["correlated_at"])
    buffered = [m for m in gold["messages"] if m["duplicate_of"] is None and m["ttl_ms"] > 0]
    got = rows(spark, "SELECT tenant_id, unix_millis(hour) AS hour, buffered, uncorrelated, peak_buffered "
                      "FROM buffered_backlog ORDER BY tenant_id, hour")
    assert {r["tenant_id"] for r in got} == {m["tenant_id"] for m in buffered}
    for tenant in {r["tenant_id"] for r in got}:
        hours = [r["hour"] for r in got if r["tenant_id"] == tenant]
        assert hours == list(range(hours[0], as_of // HOUR * HOUR + 1, HOUR))
    for r in got:
        end = min(r["hour"] + HOUR - 1, as_of)  # the last millisecond the row covers
        mine = [m for m in buffered if m["tenant_id"] == r["tenant_id"] and m["published_at"] <= end]
        assert r["buffered"] == sum(end < m["deadline"] for m in mine)
        assert r["uncorrelated"] == sum(end < min(m["deadline"], first[m["message_key"]]) for m in mine)
        # the peak: the level the hour starts with, or the level after any change within it
        moments = [r["hour"]] + [t for m in mine for t in (m["published_at"], m["deadline"]) if r["hour"] <= t <= end]
        assert r["peak_buffered"] == max(sum(m["published_at"] <= t < m["deadline"] for m in mine) for t in moments)
    assert max(r["buffered"] for r in got) > 0


def test_duplicate_rejections_and_hourly_activity(spark, gold):
    messages = gold["messages"]
    expected = Counter((m["tenant_id"], m["name"]) for m in messages if m["status"] == "REJECTED_DUPLICATE")
    got = rows(spark, "SELECT * FROM duplicate_rejections")
    assert sum(r["messages"] for r in got) == len(messages)
    assert {(r["tenant_id"], r["name"]): r["rejected"] for r in got if r["rejected"]} == expected and expected
    for r in got:
        assert r["rejection_rate"] == r["rejected"] / r["messages"]
    totals = rows(spark, "SELECT sum(published) AS published, sum(correlations) AS correlations, "
                         "sum(start_correlations) AS start, sum(expired_unmatched) AS expired, "
                         "sum(rejected_duplicates) AS rejected FROM hourly_activity")[0]
    assert totals == {"published": len(messages), "correlations": len(gold["correlations"]),
                      "start": sum(c["subscription_type"] == "START" for c in gold["correlations"]),
                      "expired": sum(m["status"] == "EXPIRED" for m in messages),
                      "rejected": sum(expected.values())}


def test_start_lock_waits_are_the_orders_placed_again_while_the_first_ran(spark, gold):
    messages = {m["message_key"]: m for m in gold["messages"]}
    started_on_publish = {c["message_key"] for c in gold["correlations"]
                          if c["subscription_type"] == "START" and c["correlated_at"] == c["message_published_at"]}
    again = {k for k, m in messages.items() if (m["message_id"] or "").endswith("-again")
             and m["duplicate_of"] is None and k not in started_on_publish}
    instances = {i["process_instance_key"]: i for i in gold["message_started_instances"]}
    [as_of] = [r["as_of"] for r in gold["as_of"]]
    got = rows(spark, "SELECT message_key, lock_holder, outcome, waited_s, unix_millis(correlated_at) AS correlated_at, "
                      "unix_millis(lock_released_at) AS released FROM start_lock_waits")
    assert again and {r["message_key"] for r in got} == again
    for r in got:
        m, holder = messages[r["message_key"]], instances[r["lock_holder"]]
        assert holder["correlation_key"] == m["correlation_key"] and holder["started_at"] <= m["published_at"]
        assert holder["ended_at"] is None or holder["ended_at"] > m["published_at"]
        if r["outcome"] == "STARTED":  # the release started it
            assert r["correlated_at"] == r["released"] == instances[f"msg-start:order:{m['message_key']}"]["started_at"]
        else:
            assert (r["outcome"], m["status"]) in {("EXPIRED", "EXPIRED"), ("WAITING", "BUFFERED")}
        assert r["waited_s"] == ((r["correlated_at"] or min(m["deadline"], as_of)) - m["published_at"]) / 1000


def test_subscriptions_closed_without_a_message(spark, gold):
    expected = {(s["tenant_id"], s["element_instance_key"], s["message_name"]): s["close_reason"]
                for s in gold["subscriptions"] if s["closed_at"] is not None and s["correlation_count"] == 0}
    got = rows(spark, "SELECT * FROM subscriptions_closed_without_message")
    assert {(r["tenant_id"], r["element_instance_key"], r["message_name"]): r["close_reason"] for r in got} == expected
    assert "SIBLING_CORRELATED" in expected.values()


def test_lock_waits_and_backlog_peaks_where_the_demo_has_no_example(spark, tmp_path, demo_lake):
    """A blocked message another process caught (still WAITING for the locked one), a start
    event that never started anything, one that a redeployment at the same instant removed,
    and an hour whose first change is an expiry (its peak is the level it started with)."""
    def at(hhmm: str) -> str:
        return f"2026-01-01T{hhmm}:00Z"

    messages = [
        {"position": 2, "name": "placed", "correlation_key": "k", "published_at": at("10:00"), "ttl_ms": 0},
        {"position": 4, "name": "placed", "correlation_key": "k", "published_at": at("10:10"), "ttl_ms": 5 * HOUR},
        {"position": 5, "name": "placed2", "correlation_key": "k", "published_at": at("10:20"), "ttl_ms": 60_000},
        {"position": 7, "name": "placed", "correlation_key": "k", "published_at": at("10:40"), "ttl_ms": 60_000},
        {"position": 8, "name": "ping", "correlation_key": "q", "published_at": at("10:50"), "ttl_ms": 1_200_000},
        {"position": 9, "name": "noise", "correlation_key": "z", "published_at": at("12:00"), "ttl_ms": 0},
    ]
    events = [
        {"position": 1, "type": "PROCESS_DEPLOYED", "timestamp": at("09:00"), "bpmn_process_id": "order",
         "process_version": 1, "message_start_events": ["placed", "placed2"]},
        {"position": 3, "type": "SUBSCRIPTION_OPENED", "timestamp": at("10:05"), "bpmn_process_id": "billing",
         "process_instance_key": "b1", "element_instance_key": "e1", "element_type": "INTERMEDIATE_CATCH_EVENT",
         "message_name": "placed", "correlation_key": "k"},
        {"position": 10, "type": "PROCESS_DEPLOYED", "timestamp": at("10:40"), "bpmn_process_id": "order",
         "process_version": 2, "message_start_events": []},  # before message 7 of the same instant (rule 2)
    ]
    lake = str(tmp_path / "lake")
    assert cli.main(["run", "--landing", str(write_landing(tmp_path / "landing", messages, events)),
                     "--lake", lake]) == 0
    try:
        catalog.register(spark, lake)
        waits = rows(spark, "SELECT message_key, lock_holder, outcome, waited_s FROM start_lock_waits")
        assert sorted(waits, key=lambda r: r["message_key"]) == [
            {"message_key": 4, "lock_holder": "msg-start:order:2", "outcome": "WAITING", "waited_s": 6600.0},
            {"message_key": 5, "lock_holder": "msg-start:order:2", "outcome": "EXPIRED", "waited_s": 60.0}]
        backlog = rows(spark, "SELECT hour(hour) AS h, buffered, peak_buffered FROM buffered_backlog ORDER BY h")
        assert backlog == [{"h": 10, "buffered": 2, "peak_buffered": 2}, {"h": 11, "buffered": 1, "peak_buffered": 2},
                           {"h": 12, "buffered": 1, "peak_buffered": 1}]
    finally:
        catalog.register(spark, demo_lake)


def test_delivery_views_follow_every_event_of_the_demo_s_delivery(spark, gold):
    """The demo delivered each correlation once (conftest.demo_run): every event ACKED."""
    events = rows(spark, "SELECT * FROM delivery_events")
    assert len(events) == len(gold["correlations"]) and {e["status"] for e in events} == {"ACKED"}
    assert {(e["message_key"], e["bpmn_process_id"]) for e in events} == {
        (c["message_key"], c["bpmn_process_id"]) for c in gold["correlations"]}
    assert rows(spark, "SELECT sum(acked) AS n, sum(events) AS e FROM delivery_by_hour") == [
        {"n": len(events), "e": len(events)}]
    latency = rows(spark, "SELECT * FROM delivery_latency")
    assert sum(r["acked"] for r in latency) == len(events) and all(r["p50_s"] >= 0 for r in latency)
    assert rows(spark, "SELECT * FROM dead_letters") == []
