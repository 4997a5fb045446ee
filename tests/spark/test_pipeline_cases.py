"""Hand-written cases through the real pipeline, each under its own tenant, in two runs:
what the engine-level tests of test_rules.py cannot see — late data that moves a
correlation to another key (rule 4), tenants kept apart by the Spark partitioning
(rules 3a, 5, 7, 19), gold/messages' columns and the contract's defaults, the
default as_of (rule 23), instance keys of correlake's reserved form made by a
producer, a long chain of linked keys, an increment that recomputes the one key
group it touches, the outbox that follows gold (a moved correlation retracted), the
key columns of silver the process keeps for the lake's next run, and exact replays
collapsed by bronze and silver before the engine sees them (rule 8). Both runs take
the Spark backend, forced: its plan of an increment, with its joins over silver's key columns,
end to end (the driver backend's increments: the property test's split, and most other runs).
Positions repeat across the two streams, as they may."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.helpers import read_gold, versions, write_jsonl
from support.lake_rows import table_rows
from support.outbox_model import EVENT_FIELDS, assert_outbox_agrees, read_outbox
from support.records import S, deploy, ended, left, msg, sub

from correlake.caches import history_keys
from correlake.config import GOLD_TABLES, table_path
from correlake.lake import journal
from correlake.run import pipeline
from correlake.transforms import scope

PUBLISHED = datetime(2025, 12, 31, 23, 0, 0, 500_000, tzinfo=timezone.utc)  # "2026-01-01T00:00:00.5+01:00"
AS_OF = PUBLISHED + timedelta(seconds=10)  # the latest event time: a workflow event's
NUL_TENANTS = ("a", "a\u0000b")  # tenant + key texts that a separator would run together
CHAIN = 60  # links in a chain of keys (key grouping once gave up after 50)
RESERVED_KEYS = ("msg-start:orders", "msg-start:p:99999999999999999999", "msg-start:")  # no instance correlake starts
# Rule 8, tenant "replay": records sent again (as is, and with their fields in another order)
REPLAYED = msg(50, 1, "m", "r", tenant="replay")  # r1 and r2 (process p) wait for it: r1 opened first
REPLAYED_START = msg(51, 1, "s", "", tenant="replay")  # an empty key: each message starts an instance of q
REPLAYED_OPEN = sub(51, 0, "r1", "m", "r", pik="i1", tenant="replay")

RUN_1 = (
    [msg(1, 4, "m", "k1", tenant="late"),
     msg(10, 2, "m", "k", tenant="A"), msg(11, 3, "s", "x", tenant="A"), msg(12, 3, "s", "x", tenant="B"),
     msg(20, 5, "z", "b\u0000c", tenant="a"), msg(21, 6, "m", "c", tenant="a\u0000b"),
     msg(22, 7, "z", "b\u0000c", mid="id1", tenant="a"), msg(23, 8, "z", "c", mid="id1", tenant="a\u0000b"),
     {"position": 30, "name": "m", "correlation_key": 7, "published_at": "2026-01-01T00:00:00.5+01:00",
      "message_id": "", "variables": None, "tenant_id": None, "ttl_ms": None},
     {"position": 31, "name": "m", "correlation_key": "k", "published_at": "2026-01-02T00:00:00Z",
      "ttl_ms": -1},  # quarantined: its time does not count for as_of
     msg(40, 3, "m", "rk0", tenant="reserved"), msg(41, 3, "b", f"c{CHAIN}", tenant="chain"),
     REPLAYED, REPLAYED_START, REPLAYED, json.dumps(dict(reversed(REPLAYED.items()))), REPLAYED_START],
    [sub(1, 2, "e", "m", "k1", etype="RECEIVE_TASK", tenant="late"),
     sub(10, 0, "e", "m", "k", tenant="A"), left(11, 1, "e", tenant="B"), ended(12, 1, "i", tenant="B"),
     deploy(13, 0, "q", starts=("s",), tenant="A"), deploy(14, 0, "q", starts=("s",), tenant="B"),
     deploy(20, 0, "p", starts=("m",), tenant="a"),
     {"position": 30, "type": "ELEMENT_LEFT", "timestamp": AS_OF.isoformat(), "element_instance_key": "none"},
     *(event for n, key in enumerate(RESERVED_KEYS)  # the reserved form, made by a producer
       for event in (sub(40 + 2 * n, 1, f"r{n}", "m", f"rk{n}", pik=key, tenant="reserved"),
                     ended(41 + 2 * n, 2, key, tenant="reserved"))),
     *(event for n in range(CHAIN)  # element instance n waits on keys c{n} and c{n+1}: one group of them all
       for event in (sub(100 + 2 * n, 1, f"e{n}", "a", f"c{n}", etype="RECEIVE_TASK", tenant="chain"),
                     sub(101 + 2 * n, 1, f"e{n}", "b", f"c{n + 1}", etype="BOUNDARY_EVENT", tenant="chain"))),
     deploy(50, 0, "q", starts=("s",), tenant="replay"), REPLAYED_OPEN,
     sub(52, 0, "r2", "m", "r", pik="i2", tenant="replay"), REPLAYED_OPEN],
)
RUN_2 = (  # late data: a boundary event on the same element, opened before run 1's receive task
    [msg(2, 3, "c", "k2", tenant="late")],
    [sub(2, 1, "e", "c", "k2", etype="BOUNDARY_EVENT", tenant="late")],
)


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """(lake, every table's version after run 1, run 2's result, gold after run 1)."""
    root = tmp_path_factory.mktemp("cases")
    lake = str(root / "lake")
    for n, (messages, events) in enumerate((RUN_1, RUN_2)):
        write_jsonl(root / "landing" / "messages" / f"{n}.jsonl", messages)
        write_jsonl(root / "landing" / "workflow_events" / f"{n}.jsonl", events)
        if n == 1:
            after_first, first_gold = versions(lake), read_gold(lake)
        result = pipeline.run(spark, str(root / "landing"), lake, max_quarantine_ratio=1.0, path="spark")
    return lake, after_first, result, first_gold


@pytest.fixture(scope="module")
def gold(spark, runs):
    return read_gold(runs[0])


def rows(gold, table: str, tenant: str) -> list[dict]:
    return sorted((r for r in gold[table] if r["tenant_id"] == tenant), key=lambda r: sorted(r.items()))


def test_late_data_moves_a_correlation_to_another_key_of_the_same_element(gold):
    """Run 1 correlated message 1 (key k1) to the receive task; run 2 brings an earlier
    interrupting boundary event (key k2) whose message correlates first: message 1's
    correlation is deleted, the receive task's subscription closed as a sibling."""
    assert [(c["message_key"], c["element_instance_key"], c["correlated_at"])
            for c in rows(gold, "correlations", "late")] == [(2, "e", 3 * S)]
    subs = {s["message_name"]: (s["closed_at"], s["close_reason"], s["correlation_count"])
            for s in rows(gold, "subscriptions", "late")}
    assert subs == {"c": (3 * S, "CORRELATED", 1), "m": (3 * S, "SIBLING_CORRELATED", 0)}
    assert {m["message_key"]: (m["status"], m["correlation_count"]) for m in rows(gold, "messages", "late")} == {
        1: ("EXPIRED", 0), 2: ("CORRELATED", 1)}


def test_workflow_events_and_start_locks_stay_in_their_tenant(gold):
    """Tenant B's ELEMENT_LEFT and INSTANCE_ENDED for the same keys leave A's subscription
    open; the same start event in A and B starts one instance in each."""
    assert [(c["message_key"], c["element_instance_key"]) for c in rows(gold, "correlations", "A")
            if c["subscription_type"] == "CATCH"] == [(10, "e")]
    assert [(s["close_reason"], s["closed_at"]) for s in rows(gold, "subscriptions", "A")] == [("CORRELATED", 2 * S)]
    assert [(i["tenant_id"], i["process_instance_key"], i["ended_at"])
            for tenant in "AB" for i in rows(gold, "message_started_instances", tenant)] == [
        ("A", "msg-start:q:11", None), ("B", "msg-start:q:12", None)]


def test_tenant_and_key_are_never_run_together(gold):
    """Tenant "a" with key "b␀c" and tenant "a␀b" with key "c": neither sees the other's
    deployments, and equal message ids in the two are no duplicates."""
    for tenant in NUL_TENANTS:
        assert rows(gold, "correlations", tenant) == [] and rows(gold, "message_started_instances", tenant) == []
    statuses = {m["message_key"]: (m["status"], m["duplicate_of"]) for t in NUL_TENANTS
                for m in rows(gold, "messages", t)}
    assert statuses == {20: ("EXPIRED", None), 21: ("EXPIRED", None), 22: ("EXPIRED", None),
                        23: ("EXPIRED", None)}


def test_instance_keys_of_the_reserved_form_that_no_start_made_end_nothing(gold):
    """Keys that begin with `msg-start:` but name no instance correlake starts (no message
    position, or one past BIGINT): their INSTANCE_ENDED are held (rule 20a) for a start
    that never comes, so the subscriptions in them stay open and one takes its message."""
    assert [(c["message_key"], c["element_instance_key"], c["correlated_at"])
            for c in rows(gold, "correlations", "reserved")] == [(40, "r0", 3 * S)]
    assert {s["process_instance_key"]: s["close_reason"] for s in gold["subscriptions"]
            if s["tenant_id"] == "reserved"} == dict(zip(RESERVED_KEYS, ("CORRELATED", None, None)))
    assert rows(gold, "message_started_instances", "reserved") == []


def test_a_long_chain_of_linked_keys_is_one_group(gold):
    """Sixty element instances, each waiting on two keys, the next on the second of them:
    one key group of 61 keys. The last key's message takes the last boundary event and
    closes its receive task; every other subscription stays open."""
    assert [(c["message_key"], c["element_instance_key"]) for c in rows(gold, "correlations", "chain")] == [
        (41, f"e{CHAIN - 1}")]
    closed = {(s["element_instance_key"], s["message_name"]): s["close_reason"] for s in gold["subscriptions"]
              if s["tenant_id"] == "chain" and s["close_reason"]}
    assert closed == {(f"e{CHAIN - 1}", "b"): "CORRELATED", (f"e{CHAIN - 1}", "a"): "SIBLING_CORRELATED"}


def test_r8_an_exact_replay_is_one_record_in_silver_and_correlates_once(spark, runs, gold):
    """Rule 8 through bronze and silver: message 50 three times in a file (twice as written,
    once with its fields in another order: equal as parsed JSON), message 51 and
    subscription 51 twice each. Bronze keeps every line, each but the first flagged as a
    replay; silver has one row per position; message 50 correlates once (to r1, opened
    first; as a second message it would go to r2 of the same process), message 51 starts
    one instance (an empty key takes no lock: a second message would start another)."""
    def read(name: str) -> list[dict]:  # with delta-rs
        return [r for r in table_rows(runs[0], name) if r["tenant_id"] == "replay"]

    assert sorted((r["position"], r["_is_replay"]) for r in read("bronze_messages")) == [
        (50, False), (50, True), (50, True), (51, False), (51, True)]
    assert sorted((r["position"], r["_is_replay"]) for r in read("bronze_workflow_events")) == [
        (50, False), (51, False), (51, True), (52, False)]
    assert sorted(r["message_key"] for r in read("silver_messages")) == [50, 51]
    assert sorted(r["position"] for r in read("silver_workflow_events")) == [50, 51, 52]
    assert sorted((c["message_key"], c["subscription_type"], c["process_instance_key"], c["element_instance_key"] or "")
                  for c in gold["correlations"] if c["tenant_id"] == "replay") == [
        (50, "CATCH", "i1", "r1"), (51, "START", "msg-start:q:51", "")]
    assert {m["message_key"]: (m["status"], m["correlation_count"]) for m in rows(gold, "messages", "replay")} == {
        50: ("CORRELATED", 1), 51: ("CORRELATED", 1)}
    assert {s["element_instance_key"]: (s["close_reason"], s["correlation_count"])
            for s in gold["subscriptions"] if s["tenant_id"] == "replay"} == {"r1": ("CORRELATED", 1), "r2": (None, 0)}
    assert [i["process_instance_key"] for i in rows(gold, "message_started_instances", "replay")] == ["msg-start:q:51"]


def test_a_message_row_carries_the_contracts_defaults_and_the_default_as_of(gold):
    """Null tenant, message id "" and null TTL and variables take their defaults; a number
    key is its text; as_of is the latest event time of every valid record, here a workflow
    event's (the quarantined message's later time does not count)."""
    [row] = rows(gold, "messages", "<default>")
    published = int(PUBLISHED.timestamp() * 1000)
    assert row == {"message_key": 30, "tenant_id": "<default>", "name": "m", "correlation_key": "7",
                   "message_id": None, "published_at": published, "ttl_ms": 3_600_000,
                   "deadline": published + 3_600_000, "variables": "{}", "status": "BUFFERED", "duplicate_of": None,
                   "correlation_count": 0}
    assert gold["as_of"] == [{"as_of": int(AS_OF.timestamp() * 1000)}]  # the lake's one as_of (contract rev. 2)


def test_an_increment_recomputes_only_the_key_group_it_touches(spark, runs, gold):
    """Run 2's records (keys k1 and k2 of tenant "late", linked by element e) touch one key
    group of the lake's: a gold table gets at most one MERGE, whose source is only that
    group's rows that changed (and the keys of its rows that go), and no other tenant's
    row changes. A table where none of the group's rows changed gets no commit."""
    lake, after_first, result, first_gold = runs
    assert result.touched_groups == 1
    for table in GOLD_TABLES:
        commits = [c for c in DeltaTable(table_path(lake, table)).history()  # the log, read by delta-rs
                   if c["version"] > after_first[table]]
        was, now = ([repr(sorted(r.items())) for r in rows(g, table, "late")] for g in (first_gold, gold))
        changed = set(now) - set(was)
        if changed or set(was) - set(now):
            [commit] = commits
            assert commit["operation"] == "MERGE", table
            metrics = {k: int(v) for k, v in commit["operationMetrics"].items() if k.startswith("num")}
            assert metrics["numSourceRows"] == len(changed) + metrics["numTargetRowsDeleted"], table
            assert metrics["numTargetRowsInserted"] + metrics["numTargetRowsUpdated"] == len(changed), table
        else:  # nothing to restate: no MERGE
            assert commits == [], table
        others = [sorted(repr(r) for r in g[table] if r["tenant_id"] != "late") for g in (first_gold, gold)]
        assert others[0] and others[0] == others[1], table


def test_the_outbox_follows_gold_and_retracts_what_late_data_moved(spark, runs):
    """After each run the outbox's live events are gold's correlations. Run 2 moved tenant
    "late"'s correlation from key k1 to k2: k1 gets a RETRACTED event of what it had
    (sequence 2), k2 its first CORRELATED one, in one more commit of the outbox, the
    published version; a run with nothing new adds nothing."""
    lake, after_first, result, _ = runs
    first = read_outbox(lake, after_first["outbox"])
    events = assert_outbox_agrees(lake)
    assert result.outbox_events == 2 and not result.outbox_backfilled
    late = sorted((e["correlation_key"], e["sequence"], e["kind"], e["message_key"], e["_run_id"])
                  for e in events if e["tenant_id"] == "late")
    assert late == [("k1", 1, "CORRELATED", 1, first[0]["_run_id"]), ("k1", 2, "RETRACTED", 1, result.run_id),
                    ("k2", 1, "CORRELATED", 2, result.run_id)]
    [correlated] = [e for e in first if e["tenant_id"] == "late"]
    [retracted] = [e for e in events if e["kind"] == "RETRACTED"]
    strip = lambda e: {k: v for k, v in e["payload"].items() if k not in EVENT_FIELDS}  # noqa: E731
    assert strip(retracted) == strip(correlated) and retracted["event_id"] != correlated["event_id"]
    assert [e for e in events if e["_run_id"] != result.run_id] == first  # appended, nothing rewritten
    now = versions(lake)
    assert now["outbox"] == after_first["outbox"] + 1
    present = {name: v for name, v in now.items() if v >= 0}  # a canonical lake has no exporter records' tables
    assert {name: journal.published_version(lake, name) for name in present} == present
    assert pipeline.run(spark, str(Path(lake).parent / "landing"), lake).nothing_new and versions(lake) == now


def test_the_process_caches_silvers_key_columns_as_its_last_run_published_them(spark, runs):
    """After run 2 (which started from what run 1 left), the process caches silver's key
    columns (the rows silver's tables hold), for exactly that lake at those versions. A
    quiet hour, which writes no silver table, carries them over; a record of another writer
    (a rollback, maintenance) or another version makes the next run read them from the lake."""
    lake = runs[0]
    read = lambda name: spark.read.format("delta").load(table_path(lake, name))  # noqa: E731
    lake_keys = scope.HistoryKeys.read(scope.message_records(read("silver_messages")),
                                     read("silver_workflow_events"), read("key_groups"))
    now = versions(lake)
    cached = history_keys.cached(lake, now)
    for name in ("messages", "events", "key_groups"):
        assert sorted(getattr(cached, name).collect()) == sorted(getattr(lake_keys, name).collect()), name
    assert history_keys.cached(str(Path(lake).parent / "other"), now) is None
    assert history_keys.cached(lake, {**now, "silver_messages": now["silver_messages"] + 1}) is None
    quiet = pipeline.run(spark, str(Path(lake).parent / "landing"), lake, as_of=int(AS_OF.timestamp() * 1000) + 3600_000)
    assert quiet.nothing_new and quiet.run_id and history_keys.cached(lake, versions(lake)) is cached
    journal.mark_published(lake)  # as a rollback or maintenance records it
    assert history_keys.cached(lake, versions(lake)) is None
