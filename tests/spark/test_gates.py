"""Each data-quality gate fails on data that breaks its suite, and a failing gate
stops the run with exit 1, a readable report, and gold left as it was."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import jinja2
import pytest
from pyspark.sql import functions as F
from support.helpers import flock_waiters, write_jsonl
from support.lake_rows import table_rows

from correlake.config import data_docs_dir, table_path, validation_results_dir
from correlake.interfaces import cli
from correlake.lake import tables as lake
from correlake.quality import gates, gx, metrics, rules
from correlake.transforms import gold

T = datetime(2026, 1, 1)


def frame(spark, rows, schema):
    return spark.createDataFrame(rows, schema)


def test_bronze_gate_fails_on_duplicate_positions_and_bad_enums(spark, tmp_path):
    msgs = frame(spark, [(1, "t", "k", T, 10), (1, "t", "k", T, 10)],
                 "position bigint, tenant_id string, correlation_key string, published_at timestamp, ttl_ms bigint")
    events = frame(spark, [(2, "t", "SUBSCRIPTION_OPENED", T, "TASK", None)],
                   "position bigint, tenant_id string, type string, timestamp timestamp, element_type string, "
                   "correlation_key string")
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("bronze", rules.bronze_frames(msgs, events), str(tmp_path))
    report = exc.value.report
    assert "repeated_position: 1 unexpected, rows repeating another's (stream, position)" in report
    assert "unknown_element_type: 1 unexpected, rows where element_type NOT IN" in report and "TASK" in report
    assert "Data Docs: " in report and str(tmp_path) in report


def test_one_query_counts_each_condition_as_gx_did_row_by_row(spark):
    """Nulls pass a condition on a value (as GX's map expectations skip them); repeated
    values count the rows after the first of each, rows with every key column null aside."""
    messages = frame(spark, [(1, "t", "k", T, 10)] * 3 + [(None, "t", "k", T, None)] * 2 + [(2, None, None, T, -1)],
                     "position bigint, tenant_id string, correlation_key string, published_at timestamp, ttl_ms bigint")
    events = frame(spark, [(3, "t", "SUBSCRIPTION_OPENED", T, None, "k")], "position bigint, tenant_id string, "
                   "type string, timestamp timestamp, element_type string, correlation_key string")
    keys = _silver(spark, [(None, "t", "m", "k", None, T, 0, T, None)] * 2 + [(1, "t", "m", "k", None, T, 0, T, None)] * 2)
    measured = metrics.measure({**rules.bronze_frames(messages, events), **rules.silver_frames(keys)})
    assert measured["bronze"] == {
        "null_position": 2, "null_tenant_id": 1, "null_event_time": 0, "null_routing_key_ok": 0,
        "missing_routing_key": 1, "unknown_kind": 0, "unknown_element_type": 0, "negative_ttl_ms": 1,
        "repeated_position": 3}  # (messages, 1) twice more, (messages, null) once more
    assert measured["silver"]["repeated_message_key"] == 1


def test_validations_and_their_pages_outlive_the_process_until_maintenance_removes_them(spark, tmp_path, monkeypatch):
    """A failure names its Data Docs page; the page stays through later validations, in this
    process and in the next (results are kept in the lake), until `correlake maintain` removes
    validations past its retention, each suite's latest kept. The index lists the latest ones.
    GX's page templates are compiled once a process (`docs_views`): not again for later pages,
    nor for a new context's."""
    events = frame(spark, [], "position bigint, tenant_id string, type string, timestamp timestamp, "
                              "element_type string, correlation_key string")

    def bronze(ttl_ms):
        messages = frame(spark, [(1, "t", "k", T, ttl_ms)], "position bigint, tenant_id string, "
                         "correlation_key string, published_at timestamp, ttl_ms bigint")
        return rules.bronze_frames(messages, events)

    def indexed():
        return re.findall(r"validations/bronze/[^'\"]+\.html", (docs / "index.html").read_text())

    lake_dir, docs = str(tmp_path), data_docs_dir(tmp_path)
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("bronze", bronze(-1), lake_dir)
    failed = Path(re.search(r"Data Docs: (\S+\.html)", exc.value.report).group(1))
    compiled = compilations(monkeypatch)
    gates.check("bronze", bronze(10), lake_dir)
    gx._context.cache_clear()  # as in the next process
    gates.check("bronze", bronze(10), lake_dir)
    pages = sorted(docs.glob("validations/bronze/*/*/*.html"))
    assert len(pages) == 3 and failed == pages[0] and "Failed" in failed.read_text()
    assert sorted(set(indexed())) == [str(p.relative_to(docs)) for p in pages]
    assert sorted(p.stem for p in docs.glob("expectations/*.html")) == sorted(rules.FRAME_KEYS)  # every suite's
    (validation_results_dir(lake_dir) / "bronze" / "__none__" / ".DS_Store").write_text("")  # not GX's: ignored
    assert gx.old_validations(lake_dir, 1) == []
    old = gx.old_validations(lake_dir, 0)
    assert sorted(docs / "validations" / v for v in old) == [p.parent for p in pages[:2]]
    legacy = docs / "validations" / "bronze" / "__none__" / "20250101T000000.000000Z"
    legacy.mkdir()  # a folder GX left empty when it removed a page itself
    gx.remove_validations(lake_dir, old)
    assert not legacy.exists() and not failed.exists()
    assert set(indexed()) == {str(pages[2].relative_to(docs))}  # no link to a removed page
    gates.check("bronze", bronze(10), lake_dir)
    assert len(set(indexed())) == 2 and not failed.exists()
    assert compiled == []


def compilations(monkeypatch) -> list:
    """The names of the Jinja templates compiled from now on."""
    names, compile_ = [], jinja2.Environment.compile

    def counted(env, source, name=None, *args, **kwargs):
        names.append(name)
        return compile_(env, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return names


HOLD = """import fcntl, os, sys
from pathlib import Path
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()  # until the test has seen the gate wait for the guard
print(len(list(Path(sys.argv[2]).rglob("*.json"))), flush=True)
"""


def test_a_gate_waits_while_another_process_writes_the_lakes_data_docs(spark, tmp_path):
    """GX's index build deletes the pages of results it did not list, so the lake's results
    and Data Docs are written by one process at a time: while another process holds them,
    a gate waits for them (seen in the kernel's lock table) and writes nothing; it writes
    once they are released."""
    messages = frame(spark, [(1, "t", "k", T, 10)], "position bigint, tenant_id string, correlation_key string, "
                     "published_at timestamp, ttl_ms bigint")
    events = frame(spark, [], "position bigint, tenant_id string, type string, timestamp timestamp, "
                              "element_type string, correlation_key string")
    lake_dir, results = str(tmp_path), validation_results_dir(tmp_path)
    gx._context(lake_dir)  # made before (GX's import, the suites' pages)
    guard = data_docs_dir(tmp_path).parent / "docs.guard"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(guard), str(results)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    failures = []

    def gate():
        try:
            gates.check("bronze", rules.bronze_frames(messages, events), lake_dir)
        except BaseException as exc:  # for the test's own thread
            failures.append(exc)

    thread = threading.Thread(target=gate)
    thread.start()
    deadline = time.monotonic() + 120
    while not flock_waiters(guard) and thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.05)  # a blocked `flock` shows in the kernel's lock table only: looked at again each 50 ms
    assert flock_waiters(guard) == 1, failures  # the gate waits for the guard ...
    assert thread.is_alive() and not list(results.rglob("*.json"))  # ... having written nothing
    assert holder.communicate("go\n", timeout=60)[0] == "0\n"  # written while it held the guard: none
    thread.join(120)
    assert not thread.is_alive() and failures == []
    assert len(list(results.rglob("*.json"))) == 1
    assert len(list(data_docs_dir(tmp_path).glob("validations/bronze/*/*/*.html"))) == 1


def _silver(spark, rows):
    return frame(spark, rows, "message_key bigint, tenant_id string, name string, correlation_key string, "
                              "message_id string, published_at timestamp, ttl_ms bigint, deadline timestamp, "
                              "duplicate_of bigint")


def test_silver_gate_fails_on_overlapping_accepted_duplicates(spark, tmp_path):
    rows = [(1, "t", "m", "k", "id", T, 60_000, T + timedelta(minutes=1), None),
            (2, "t", "m", "k", "id", T + timedelta(seconds=1), 60_000, T + timedelta(seconds=61), None)]
    silver = _silver(spark, rows)
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("silver", rules.silver_frames(silver), str(tmp_path))
    assert "overlaps_buffered_duplicate" in exc.value.report and "rule 7" in exc.value.report
    ok = silver.withColumn("duplicate_of", F.when(F.col("message_key") == 2, F.lit(1)).cast("bigint"))
    gates.check("silver", rules.silver_frames(ok), str(tmp_path))


def test_silver_gate_fails_on_an_unjustified_rejection_and_a_wrong_deadline(spark, tmp_path):
    """Message 2 is published at message 1's deadline (no longer buffered), yet rejected; 3's deadline is off."""
    rows = [(1, "t", "m", "k", "id", T, 60_000, T + timedelta(minutes=1), None),
            (2, "t", "m", "k", "id", T + timedelta(minutes=1), 60_000, T + timedelta(minutes=2), 1),
            (3, "t", "m", "k", None, T, 1_000, T + timedelta(seconds=2), None)]
    silver = _silver(spark, rows)
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("silver", rules.silver_frames(silver), str(tmp_path))
    assert "rejection_justified" in exc.value.report and "deadline_ok" in exc.value.report
    assert "unjustified_rejections [rule 7: a rejected message" in exc.value.report
    assert "wrong_deadline [rule 6: deadline = published_at + ttl_ms]: 1 unexpected" in exc.value.report
    assert "overlaps_buffered_duplicate" not in exc.value.report
    assert '"message_key": "2"' in exc.value.report  # the failing rows are named by their keys


def _sub(element_instance_key, name, element_type, interrupting, closed_at, reason, count=0):
    """A gold/subscriptions row of tenant t, process p, instance i, key k, opened at T."""
    return ("t", element_instance_key, name, "p", 1, "i", None, element_type, "k", interrupting, T, closed_at,
            reason, count)


def _gold(spark, correlations, count=1, instances=(), subscriptions=None):
    from correlake.contract.schemas import GOLD

    c = frame(spark, correlations, GOLD["correlations"])
    m = frame(spark, [(1, "t", "m", "k", None, 60_000, T, T + timedelta(minutes=1), "CORRELATED", None, 1, "{}")],
              GOLD["messages"])
    s = frame(spark, subscriptions or [_sub("e", "m", "RECEIVE_TASK", True, T, "CORRELATED", count)],
              GOLD["subscriptions"])
    i = frame(spark, list(instances), GOLD["message_started_instances"])
    return {"correlations": c, "messages": m, "subscriptions": s, "message_started_instances": i}


def test_gold_gate_fails_on_cardinality_and_windows(spark, tmp_path):
    row = (1, "t", "m", "k", "p", 1, "i", "e", None, "CATCH", T, T, "{}")
    late = (1, "t", "m", "k", "p", 1, "i", "e", None, "CATCH", T + timedelta(hours=2), T, "{}")
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("gold", rules.gold_frames(_gold(spark, [row, late], count=2)), str(tmp_path))
    report = exc.value.report
    assert "rule 15" in report and "rule 6" in report and "rule 12" in report
    gates.check("gold", rules.gold_frames(_gold(spark, [row])), str(tmp_path))


def test_gold_gate_checks_each_correlation_against_its_subscription_or_instance_and_the_lock(spark, tmp_path):
    wrong_key = (1, "t", "m", "other", "p", 1, "i", "e", None, "CATCH", T, T, "{}")
    start = (1, "t", "m", "k", "q", 2, "msg-start:q:1", None, None, "START", T, T, "{}")
    lost = (1, "t", "m", "k", "r", 1, "msg-start:r:1", None, None, "START", T, T, "{}")
    instances = [("msg-start:q:1", "t", "q", 2, 1, "k", T, None),
                 ("msg-start:q:9", "t", "q", 2, 9, "k", T + timedelta(seconds=1), T)]  # lock held; ends early
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("gold", rules.gold_frames(_gold(spark, [wrong_key, start, lost], count=2, instances=instances)),
                    str(tmp_path))
    report = exc.value.report
    for failed in ("matches_subscription", "matches_started_instance", "count_matches", "lock_ok", "rule 20a"):
        assert failed in report, failed
    assert report.count("1 unexpected") == 5, report
    row = (1, "t", "m", "k", "p", 1, "i", "e", None, "CATCH", T, T, "{}")
    released = [("msg-start:q:1", "t", "q", 2, 1, "k", T, T), ("msg-start:q:9", "t", "q", 2, 9, "k", T, None)]
    gates.check("gold", rules.gold_frames(_gold(spark, [row, start], instances=released)), str(tmp_path))


def test_gold_gate_checks_how_subscriptions_close(spark, tmp_path):
    """A receive task takes a message, yet its boundary event (same owner) stays open; a
    non-interrupting boundary says CORRELATED. An event subprocess leaves the scope's boundary open."""
    catch = [(1, "t", "m", "k", "p", 1, "i", "e", None, "CATCH", T, T, "{}")]
    later = T + timedelta(seconds=5)
    subs = [_sub("e", "m", "RECEIVE_TASK", True, T, "CORRELATED", 1), _sub("e", "cancel", "BOUNDARY_EVENT", True,
            None, None), _sub("f", "m", "BOUNDARY_EVENT", False, later, "CORRELATED")]
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("gold", rules.gold_frames(_gold(spark, catch, subscriptions=subs)), str(tmp_path))
    report = exc.value.report
    assert "closed_with_owner" in report and '"message_name": "cancel"' in report
    assert "close_consistent" in report and '"element_instance_key": "f"' in report
    subs = [_sub("e", "m", "EVENT_SUBPROCESS", True, T, "CORRELATED", 1), _sub("e", "n", "EVENT_SUBPROCESS", True,
            T, "SIBLING_CORRELATED"), _sub("e", "cancel", "BOUNDARY_EVENT", True, None, None)]
    gates.check("gold", rules.gold_frames(_gold(spark, catch, subscriptions=subs)), str(tmp_path))


def test_a_failing_gate_stops_the_run_and_leaves_gold_as_it_was(spark, tmp_path, monkeypatch, capsys):
    landing, lake_dir = tmp_path / "landing", str(tmp_path / "lake")
    opened = {"position": 1, "type": "SUBSCRIPTION_OPENED", "timestamp": 0, "bpmn_process_id": "p",
              "process_instance_key": "i", "element_instance_key": "e", "element_type": "RECEIVE_TASK",
              "message_name": "m", "correlation_key": "k"}
    write_jsonl(landing / "workflow_events" / "a.jsonl", [opened])
    write_jsonl(landing / "messages" / "a.jsonl", [{"position": 2, "name": "m", "correlation_key": "k",
                                                    "published_at": 10}])
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir]) == 0
    before = table_rows(lake_dir, "correlations")  # read with delta-rs
    versions = {t: lake.version(table_path(lake_dir, t)) for t in ("correlations", "messages")}

    real = gold.gold_tables

    def broken(*args, **kwargs):
        tables = real(*args, **kwargs)
        tables["correlations"] = tables["correlations"].unionByName(tables["correlations"])
        return tables

    monkeypatch.setattr(gold, "gold_tables", broken)
    write_jsonl(landing / "messages" / "b.jsonl", [{"position": 3, "name": "m", "correlation_key": "k",
                                                    "published_at": 20}])
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir]) == 1
    err = capsys.readouterr().err
    assert "data-quality gate 'gold' failed" in err and "Data Docs:" in err and "Gold was left as it was" in err
    assert table_rows(lake_dir, "correlations") == before
    assert {t: lake.version(table_path(lake_dir, t)) for t in ("correlations", "messages")} == versions


def test_a_gate_checked_while_the_next_stage_fails_is_what_the_run_reports(spark, tmp_path, monkeypatch, capsys):
    """Gates are checked alongside the next stage: when that stage fails while a gate that
    fails is pending, the gate's failure is reported (the stage may have failed on what it
    rejects), and nothing is written."""
    landing, lake_dir = tmp_path / "landing", str(tmp_path / "lake")
    write_jsonl(landing / "messages" / "a.jsonl", [{"position": 1, "name": "m", "correlation_key": "k",
                                                    "published_at": 10}])
    gold_failed = threading.Event()
    real = rules.silver_frames

    def failing_late(messages):  # the silver gate fails, once the gold stage has
        assert gold_failed.wait(120)
        return {"silver": real(messages)["silver"].withColumn("deadline_ok", F.lit(False))}

    def engine_breaks(*args, **kwargs):
        gold_failed.set()
        raise RuntimeError("the engine broke on silver's rows")

    monkeypatch.setattr(rules, "silver_frames", failing_late)
    monkeypatch.setattr(gold, "run_engine", engine_breaks)  # on either path
    monkeypatch.setattr(gold, "run_engine_in_driver", engine_breaks)
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir]) == 1
    err = capsys.readouterr().err
    assert "data-quality gate 'silver' failed" in err and "engine broke" not in err
    assert not (tmp_path / "lake" / "gold").exists()
