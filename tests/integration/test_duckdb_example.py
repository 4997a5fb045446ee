"""`examples/read_gold_duckdb.py` reads gold without Spark or Java (delta-rs + DuckDB) and
answers as Spark does — also on tables with deletion vectors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from correlake.config import PROJECT_ROOT, table_path
from correlake.lake.sqlfiles import delta_table

EXAMPLE = PROJECT_ROOT / "examples" / "read_gold_duckdb.py"


def example(lake: str, sql: str) -> list[dict]:
    """Run the example in a process with no Java and no Spark: no PATH, no JAVA_HOME, no SPARK_HOME."""
    result = subprocess.run([sys.executable, str(EXAMPLE), lake, sql, "--json"], capture_output=True, text=True,
                            timeout=120, env={"PATH": "/nonexistent", "HOME": "/tmp"})
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def spark_rows(spark, sql: str) -> list[dict]:
    return [r.asDict() for r in spark.sql(sql).collect()]


def test_example_answers_as_spark_does(spark, demo_lake):
    query = ("SELECT status, count(*) AS n, sum(correlation_count) AS c, min(message_key) AS first "
             "FROM {messages} GROUP BY status ORDER BY status")
    ours = example(demo_lake, query.format(messages="gold_messages"))
    theirs = spark_rows(spark, query.format(messages=delta_table(table_path(demo_lake, 'messages'))))
    assert ours == theirs and len(ours) == 3

    query = ("SELECT bpmn_process_id, subscription_type, count(*) AS n, {millis}(max(correlated_at)) AS last "
             "FROM {correlations} GROUP BY ALL ORDER BY ALL")
    ours = example(demo_lake, query.format(millis="epoch_ms", correlations="gold_correlations"))
    theirs = spark_rows(spark, query.format(millis="unix_millis",
                                            correlations=delta_table(table_path(demo_lake, 'correlations'))))
    assert ours == theirs and len(ours) == 3


# Times of any year: years 1 to 9999 are valid times; pandas (in the gates) holds 1677-2262
# only, and Parquet's INT96 (Spark's default) is read wrapped by delta-rs outside that range.
YEARS = [{"position": 11, "name": "m", "correlation_key": "a", "published_at": "1600-01-01T00:00:00Z"},
         {"position": 12, "name": "m", "correlation_key": "b", "published_at": "2026-01-01T00:00:00Z",
          "ttl_ms": 10_000_000_000_000},  # deadline 2342-11-21T17:46:40Z
         {"position": 13, "name": "m", "correlation_key": "c", "published_at": "0001-01-01T00:00:00Z",
          "ttl_ms": 0}], [
         {"position": 11, "type": "SUBSCRIPTION_OPENED", "timestamp": "1600-01-01T00:00:01Z",
          "bpmn_process_id": "p", "process_instance_key": "i", "element_instance_key": "e",
          "element_type": "RECEIVE_TASK", "message_name": "m", "correlation_key": "a"},
         {"position": 12, "type": "INSTANCE_ENDED", "timestamp": "2300-01-01T00:00:00Z",
          "process_instance_key": "other"}]


@pytest.fixture(scope="module")
def two_runs(spark, tmp_path_factory):
    """One lake of two runs: the default tenant's records, of which run 2 restates gold
    rows; and, in run 1, tenant `years`' records of times of any year (YEARS). (The lake,
    run 1's result.)"""
    from support.helpers import opened, publish, write_landing

    from correlake.run import pipeline

    root = tmp_path_factory.mktemp("duckdb_example")
    lake, t0 = str(root / "lake"), 1767225600000
    landing = write_landing(root / "landing", [publish(1, "a", t0 + 10), publish(2, "b", t0)],
                            [opened(1, "a", t0 + 20), opened(2, "b", t0 + 5)], name="first")
    write_landing(landing, *([dict(r, tenant_id="years") for r in records] for records in YEARS), name="years")
    first = pipeline.run(spark, str(landing), lake, max_quarantine_ratio=1.0)
    write_landing(landing, [publish(3, "a", t0 + 1), "not json"], [opened(3, "b", t0 + 1)], name="late")
    pipeline.run(spark, str(landing), lake, max_quarantine_ratio=1.0)
    return lake, first


def test_the_contract_tables_are_read_by_every_delta_rs_reader(spark, two_runs):
    """Bronze, quarantine and gold have no deletion vectors, a table feature that delta-rs's
    `to_pyarrow_table` and `to_pandas` refuse, also after a run restated gold rows; silver's
    restated tables have the feature."""
    from deltalake import DeltaTable

    from correlake.config import DELETION_VECTOR_TABLES, GOLD_TABLES

    lake = two_runs[0]
    correlations = spark.read.format("delta").load(table_path(lake, "correlations")).where("tenant_id = '<default>'")
    assert {(r.message_key, r.element_instance_key) for r in correlations.collect()} == {(3, "e1"), (2, "e3")}  # moved

    contract = ["bronze_messages", "bronze_workflow_events", "quarantine", *GOLD_TABLES]
    for name in contract:
        table = DeltaTable(table_path(lake, name))
        assert table.protocol().min_reader_version == 1, name
        assert table.to_pyarrow_table().num_rows == table.to_pandas().shape[0] == spark.read.format("delta").load(
            table_path(lake, name)).count(), name
    for name in DELETION_VECTOR_TABLES:
        assert "deletionVectors" in DeltaTable(table_path(lake, name)).protocol().reader_features, name


def test_example_applies_deletion_vectors(spark, demo_lake, tmp_path):
    """Lakes written before 2026-11-25 have deletion vectors in gold too."""
    lake = tmp_path / "lake"
    shutil.copytree(Path(demo_lake) / "gold", lake / "gold")
    subscriptions = table_path(lake, "subscriptions")
    spark.sql(f"ALTER TABLE {delta_table(subscriptions)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM {delta_table(subscriptions)} WHERE close_reason = 'SIBLING_CORRELATED'")
    log = sorted((Path(subscriptions) / "_delta_log").glob("*.json"))[-1].read_text()
    assert '"deletionVector":{' in log  # Delta marked the rows deleted instead of rewriting the files

    query = "SELECT close_reason, count(*) AS n FROM {t} GROUP BY close_reason ORDER BY close_reason NULLS FIRST"
    ours = example(str(lake), query.format(t="gold_subscriptions"))
    theirs = spark_rows(spark, query.format(t=delta_table(subscriptions)))
    assert ours == theirs and "SIBLING_CORRELATED" not in {r["close_reason"] for r in ours}


def test_times_of_any_year_pass_the_gates_and_read_the_same_without_spark(spark, two_runs):
    """YEARS' records (tenant `years`): none quarantined, gold read alike by the example and Spark."""
    lake, first = two_runs
    assert first.quarantined_total == 0

    query = ("SELECT message_key, {ms}(published_at) AS published, {ms}(deadline) AS deadline, status "
             "FROM {t} WHERE tenant_id = 'years' ORDER BY message_key")
    ours = example(lake, query.format(ms="epoch_ms", t="gold_messages"))
    theirs = spark_rows(spark, query.format(ms="unix_millis", t=delta_table(table_path(lake, "messages"))))
    assert ours == theirs
    assert [(r["deadline"], r["status"]) for r in ours] == [
        (-11676096000000 + 3_600_000, "CORRELATED"), (11767225600000, "BUFFERED"), (-62135596800000, "EXPIRED")]
    assert example(lake, "SELECT epoch_ms(as_of) AS as_of FROM gold_as_of") == [{"as_of": 10413792000000}]
    query = "SELECT message_key, {ms}(correlated_at) AS at FROM {t} WHERE tenant_id = 'years'"
    assert example(lake, query.format(ms="epoch_ms", t="gold_correlations")) == spark_rows(
        spark, query.format(ms="unix_millis", t=delta_table(table_path(lake, "correlations")))) == [
        {"message_key": 11, "at": -11676096000000 + 1000}]
