"""`examples/read_gold_duckdb.py` reads gold without Spark or Java (delta-rs + DuckDB) and
answers as Spark does — also on tables with deletion vectors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from correlake.config import PROJECT_ROOT, table_path
from correlake.sqlfiles import delta_table

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


def test_example_applies_deletion_vectors(spark, demo_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(Path(demo_lake) / "gold", lake / "gold")
    subscriptions = table_path(lake, "subscriptions")
    spark.sql(f"DELETE FROM {delta_table(subscriptions)} WHERE close_reason = 'SIBLING_CORRELATED'")
    log = sorted((Path(subscriptions) / "_delta_log").glob("*.json"))[-1].read_text()
    assert '"deletionVector":{' in log  # Delta marked the rows deleted instead of rewriting the files

    query = "SELECT close_reason, count(*) AS n FROM {t} GROUP BY close_reason ORDER BY close_reason NULLS FIRST"
    ours = example(str(lake), query.format(t="gold_subscriptions"))
    theirs = spark_rows(spark, query.format(t=delta_table(subscriptions)))
    assert ours == theirs and "SIBLING_CORRELATED" not in {r["close_reason"] for r in ours}
