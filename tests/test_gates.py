"""Each data-quality gate fails on data that breaks its suite, and a failing gate
stops the run with exit 1, a readable report, and gold left as it was."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from correlake import cli, gates, gold
from correlake.config import table_path
from helpers import write_jsonl

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
        gates.check("bronze", gates.bronze_frames(msgs, events), str(tmp_path))
    report = exc.value.report
    assert "expect_compound_columns_to_be_unique" in report
    assert "expect_column_values_to_be_in_set" in report and "TASK" in report
    assert "Data Docs: " in report and str(tmp_path) in report


def test_silver_gate_fails_on_overlapping_accepted_duplicates(spark, tmp_path):
    rows = [(1, "t", "m", "k", "id", T, 60_000, T + timedelta(minutes=1), None),
            (2, "t", "m", "k", "id", T + timedelta(seconds=1), 60_000, T + timedelta(seconds=61), None)]
    silver = frame(spark, rows, "message_key bigint, tenant_id string, name string, correlation_key string, "
                                "message_id string, published_at timestamp, ttl_ms bigint, deadline timestamp, "
                                "duplicate_of bigint")
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("silver", gates.silver_frames(silver), str(tmp_path))
    assert "overlaps_buffered_duplicate" in exc.value.report and "rule 7" in exc.value.report
    ok = silver.withColumn("duplicate_of", F.when(F.col("message_key") == 2, F.lit(1)).cast("bigint"))
    gates.check("silver", gates.silver_frames(ok), str(tmp_path))


def _gold(spark, correlations, count=1):
    from correlake.schemas import GOLD

    c = frame(spark, correlations, GOLD["correlations"])
    m = frame(spark, [(1, "t", "m", "k", None, 60_000, T, T + timedelta(minutes=1), "CORRELATED", None, 1, "{}", T)],
              GOLD["messages"])
    s = frame(spark, [("t", "e", "m", "p", 1, "i", None, "RECEIVE_TASK", "k", True, T, T, "CORRELATED", count)],
              GOLD["subscriptions"])
    return {"correlations": c, "messages": m, "subscriptions": s}


def test_gold_gate_fails_on_cardinality_and_windows(spark, tmp_path):
    row = (1, "t", "m", "k", "p", 1, "i", "e", None, "CATCH", T, T, "{}")
    late = (1, "t", "m", "k", "p", 1, "i", "e", None, "CATCH", T + timedelta(hours=2), T, "{}")
    with pytest.raises(gates.GateFailed) as exc:
        gates.check("gold", gates.gold_frames(_gold(spark, [row, late], count=2)), str(tmp_path))
    report = exc.value.report
    assert "rule 15" in report and "rule 6" in report and "rule 12" in report
    gates.check("gold", gates.gold_frames(_gold(spark, [row])), str(tmp_path))


def test_a_failing_gate_stops_the_run_and_leaves_gold_as_it_was(spark, tmp_path, monkeypatch, capsys):
    landing, lake_dir = tmp_path / "landing", str(tmp_path / "lake")
    opened = {"position": 1, "type": "SUBSCRIPTION_OPENED", "timestamp": 0, "bpmn_process_id": "p",
              "process_instance_key": "i", "element_instance_key": "e", "element_type": "RECEIVE_TASK",
              "message_name": "m", "correlation_key": "k"}
    write_jsonl(landing / "workflow_events" / "a.jsonl", [opened])
    write_jsonl(landing / "messages" / "a.jsonl", [{"position": 2, "name": "m", "correlation_key": "k",
                                                    "published_at": 10}])
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir]) == 0
    before = spark.read.format("delta").load(table_path(lake_dir, "correlations")).collect()
    versions = {t: spark.sql(f"DESCRIBE HISTORY delta.`{table_path(lake_dir, t)}`").count()
                for t in ("correlations", "messages")}

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
    assert spark.read.format("delta").load(table_path(lake_dir, "correlations")).collect() == before
    assert {t: spark.sql(f"DESCRIBE HISTORY delta.`{table_path(lake_dir, t)}`").count()
            for t in ("correlations", "messages")} == versions


# Per column of each suite's frame: a pool of valid values and one of values breaking some expectation.
_COLUMNS = {
    "bronze": {
        "stream": ("string", ["messages", "workflow_events"], []),
        "position": ("bigint", list(range(1, 4000)), [None, 7]),
        "tenant_id": ("string", ["t", "u"], [None]),
        "kind": ("string", ["MESSAGE", "SUBSCRIPTION_OPENED", "ELEMENT_LEFT"], ["BAD"]),
        "event_time": ("bigint", [0, 1, 2], [None]),
        "ttl_ms": ("bigint", [0, 60_000, None], [-1]),
        "element_type": ("string", ["RECEIVE_TASK", None], ["TASK"]),
        "routing_key_ok": ("boolean", [True], [False, None]),
    },
    "silver": {
        "message_key": ("bigint", list(range(1, 4000)), [None, 5]),
        "correlation_key": ("string", ["k", "l"], [None]),
        "published_at": ("timestamp", [T], [None]),
        "deadline": ("timestamp", [T, T + timedelta(minutes=1)], [T - timedelta(minutes=1), None]),
        "overlaps_buffered_duplicate": ("boolean", [False], [True, None]),
    },
    "gold_correlations": {
        "message_key": ("bigint", list(range(1, 4000)), [3]),
        "bpmn_process_id": ("string", ["p"], [None]),
        "subscription_type": ("string", ["CATCH", "START"], ["OTHER", None]),
        "message_accepted": ("boolean", [True], [False]),
        "in_message_window": ("boolean", [True], [False, None]),
        "in_subscription_window": ("boolean", [True], [False]),
    },
    "gold_subscriptions": {
        "tenant_id": ("string", ["t"], [None]),
        "element_instance_key": ("string", [f"e{i}" for i in range(4000)], ["e1"]),
        "message_name": ("string", ["m"], []),
        "opened_at": ("timestamp", [T], [None]),
        "closed_at": ("timestamp", [T, T + timedelta(minutes=1), None], [T - timedelta(minutes=1)]),
        "close_reason": ("string", ["CORRELATED", None], ["EXPIRED"]),
        "interrupting_overflow": ("boolean", [False], [True]),
    },
}


@pytest.mark.parametrize("suite", sorted(_COLUMNS))
def test_gx_sees_the_rows_that_can_fail_and_says_what_it_says_of_the_whole_frame(spark, tmp_path, suite):
    import random

    rng = random.Random(suite)
    columns = _COLUMNS[suite]
    schema = ", ".join(f"{c} {t}" for c, (t, _, _) in columns.items())
    for bad_share in (0.0, 0.002, 0.3):
        rows = [tuple(rng.choice(bad) if bad and rng.random() < bad_share else (ok[i % len(ok)] if c in (
            "position", "message_key", "element_instance_key") else rng.choice(ok))
                      for c, (_, ok, bad) in columns.items()) for i in range(3000)]
        whole = spark.createDataFrame(rows, schema).repartition(3)
        kept = gates.rows_to_validate(whole, suite)
        assert kept.count() <= 3000
        verdicts = [gates.validate(suite, f.toPandas(), str(tmp_path)) for f in (whole, kept)]
        summary = [(ok, sorted((f["expectation"], json.dumps(f["kwargs"]), f["unexpected_count"]) for f in failures))
                   for ok, failures, _ in verdicts]
        assert summary[0] == summary[1]
        if bad_share == 0.0:
            assert summary[0] == (True, []) and kept.count() <= gates.SAMPLE_ROWS
        else:
            assert not summary[0][0]
