"""`correlake maintain` on a real lake: files compacted, deletion vectors purged,
content unchanged, time travel within retention, the log's retention set, an explicit zero
retention vacuums (and removes the gates' old validations), the run lock and the rollback of an unfinished run."""

from __future__ import annotations

import os
import time

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from support.helpers import moved_away, versions
from support.lake_rows import table_rows

from correlake.config import TABLES, data_docs_dir, table_path, validation_results_dir
from correlake.interfaces import cli
from correlake.lake import journal, lock
from correlake.lake import tables as lake
from correlake.lake.sqlfiles import delta_table
from correlake.run import pipeline
from correlake.run.maintenance import LOG_RETENTION, RETENTION_CHECK, maintain
from correlake.samples.workload import BASE_MS, generate

# gold's rows a later run may change (contract: a buffered message's status crosses, an open
# subscription closes, a running instance ends), which maintenance keeps in files of their own
LIVE = {"messages": "ttl_ms > 0 AND deadline > {as_of}", "subscriptions": "closed_at IS NULL",
        "message_started_instances": "ended_at IS NULL"}


def kinds_by_file(spark, lake_dir: str, name: str) -> dict[str, set[bool]]:
    """Each data file of gold table `name` with the kinds of rows it holds: live (`LIVE`, at
    the lake's as_of) or not."""
    as_of_ms = table_rows(lake_dir, "as_of")[0]["as_of"]
    live = F.coalesce(F.expr(LIVE[name].format(as_of=f"timestamp_millis({as_of_ms})")), F.lit(False))
    found = (spark.read.format("delta").load(table_path(lake_dir, name)).groupBy(F.input_file_name().alias("file"))
             .agg(F.collect_set(live).alias("kinds")))
    return {r.file: set(r.kinds) for r in found.collect()}


def contents(lake_dir, version: dict | None = None) -> dict:
    """Every table's rows (as sorted reprs), at the given versions or the latest, read with
    delta-rs (deletion vectors applied), no Spark job."""
    out = {}
    for name in TABLES:
        rows = table_rows(lake_dir, name, version=version[name] if version else None)
        if rows is not None:  # silver/subscriptions: not written by runs
            out[name] = sorted(map(repr, rows))
    return out


@pytest.fixture(scope="module")
def lake_dir(spark, tmp_path_factory):
    """Two hourly runs; the second restates gold rows of the first, and silver's rows are
    replaced in place (deletion vectors); a file eight days old that no version holds, and a
    table with a retention of its own. The lake's name has a space and a backtick: each
    statement that names a table quotes it."""
    root = tmp_path_factory.mktemp("maintain")
    landing, lake_dir = root / "landing", str(root / "the `lake`")
    generate(landing, 300, 300, "uniform", seed=1, files=2)
    pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    generate(landing, 60, 60, "uniform", seed=2, files=2, first_position=10 ** 6, start_ms=BASE_MS + 3_600_000,
             key_count=75)  # the first hour's keys
    pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    # rows replaced in place, as a restating MERGE does in silver, and in gold in lakes from
    # before 2026-11-25: deletion vectors
    gold = delta_table(table_path(lake_dir, "subscriptions"))
    spark.sql(f"ALTER TABLE {gold} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"UPDATE {gold} SET correlation_count = correlation_count WHERE closed_at IS NULL")
    # a third of each file's rows (a landing file's positions share their parity, and a driver
    # backend's run writes a file's records together: `% 2` would match whole files)
    spark.sql(f"UPDATE {delta_table(table_path(lake_dir, 'silver_messages'))} SET ttl_ms = ttl_ms "
              "WHERE message_key % 3 = 0")
    stray = os.path.join(table_path(lake_dir, "bronze_messages"), "part-left-by-a-crashed-write.parquet")
    with open(stray, "wb") as f:  # a file no version holds, written eight days ago: VACUUM's to delete
        f.write(b"PAR1")
    os.utime(stray, (time.time() - 8 * 86400,) * 2)
    spark.sql(f"ALTER TABLE {delta_table(table_path(lake_dir, 'as_of'))} SET TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 30 days')")  # its own: always vacuumed
    return landing, lake_dir, contents(lake_dir), versions(lake_dir)


def test_maintenance_compacts_and_changes_no_row(spark, lake_dir):
    landing, lake_dir, before, old = lake_dir
    result = maintain(spark, lake_dir)
    tables = {t.table: t for t in result.tables}
    assert set(tables) == {TABLES[name] for name in before}
    assert contents(lake_dir) == before
    split = {TABLES[name] for name in LIVE}
    assert all(t.files[1] <= t.files[0] for name, t in tables.items() if name not in split)
    assert all(t.files[1] <= 2 for name, t in tables.items() if name in split)  # live rows apart: a file more
    for name in LIVE:  # each file of these holds rows a run may change, or none of them
        assert [len(kinds) for kinds in kinds_by_file(spark, lake_dir, name).values()] in ([1], [1, 1]), name
    assert tables["bronze/messages"].files[0] > 1 == tables["bronze/messages"].files[1]  # two runs' appends
    assert {name for name, t in tables.items() if t.purged_dvs} == {"silver/messages", "gold/subscriptions"}
    assert [name for name, t in tables.items() if t.dropped_feature] == ["gold/subscriptions"]  # not silver's
    assert DeltaTable(table_path(lake_dir, "subscriptions")).to_pandas().shape[0] == len(before["subscriptions"])
    # the log's retention (Delta's default 30 days) set where the table has no VACUUM retention of its own
    assert {name for name, t in tables.items() if t.log_retention_set} == set(tables) - {"gold/as_of"}
    assert DeltaTable(table_path(lake_dir, "messages")).metadata().configuration[LOG_RETENTION[0]] == LOG_RETENTION[1]
    # 168 h: every replaced file is still young; the stray file is not, and is the one vacuumed.
    assert {name: t.vacuumed for name, t in tables.items() if t.vacuumed} == {"bronze/messages": 1}
    vacuumed = {name for name in before if "VACUUM END" in {
        commit["operation"] for commit in DeltaTable(table_path(lake_dir, name)).history()}}  # the log, read by delta-rs
    assert vacuumed == {"bronze_messages", "as_of"}  # elsewhere nothing was old enough: no VACUUM ran
    assert result.validations == 0  # nor are the gates' validations of the two runs old
    assert result.delivery_attempts == 0  # no delivery pass yet: no delivery table
    assert all(t.on_disk[1] == t.on_disk[0] + t.written - t.vacuumed for t in tables.values() if t.compacted)
    assert all(t.log_files[1] > t.log_files[0] for t in tables.values())  # commits, a checkpoint
    assert contents(lake_dir, old) == before  # time travel to before maintenance
    maintained = versions(lake_dir)
    assert pipeline.run(spark, str(landing), lake_dir).nothing_new and versions(lake_dir) == maintained


def test_explicit_zero_retention_vacuums_and_rolls_back_first(spark, lake_dir, capsys):
    _, lake_dir, before, old = lake_dir
    with lock.run_lock(lake_dir):
        assert cli.main(["maintain", "--lake", lake_dir]) == 2
    assert "another correlake run holds" in capsys.readouterr().err

    journal.begin(lake_dir, "crashed-run")  # an unfinished run: a write without its commit
    lake.append(spark.read.format("delta").load(table_path(lake_dir, "runs")).limit(1), lake_dir, "runs", "x")
    unfinished = versions(lake_dir)
    assert cli.main(["maintain", "--lake", lake_dir, "--retain-hours", "0", "--dry-run", "--force"]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "would vacuum" in out and "unfinished run is pending" in out
    assert "gates: would remove 5 validations" in out  # the first run's, of 5 suites
    assert versions(lake_dir) == unfinished

    result = maintain(spark, lake_dir, retain_hours=0)
    assert result.rolled_back == "crashed-run"
    assert contents(lake_dir) == before
    tables = {t.table: t for t in result.tables}
    assert not any(t.log_retention_set for t in tables.values())  # the first maintenance set it
    assert sum(t.vacuumed for t in tables.values()) > 0
    assert all(t.on_disk[1] == t.files[1] for t in tables.values())  # only active files are left
    assert result.validations == 5  # each suite's latest is left, with its page
    assert len(list(validation_results_dir(lake_dir).glob("*/*/*/*.json"))) == 5
    assert len(list(data_docs_dir(lake_dir).glob("validations/*/*/*/*.html"))) == 5
    assert spark.conf.get(RETENTION_CHECK) == "true"  # the check was lifted for that maintenance only
    with pytest.raises(Exception, match="DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"):
        spark.sql(f"VACUUM {delta_table(table_path(lake_dir, 'messages'))} RETAIN 0 HOURS")
    with pytest.raises(Exception):  # the price of zero retention: the compacted-away files are gone
        spark.read.format("delta").option("versionAsOf", old["bronze_messages"]).load(
            table_path(lake_dir, "bronze_messages")).collect()


def test_a_first_run_and_a_rebuild_write_gold_live_rows_apart(spark, tmp_path):
    """A table's first version, and a rebuild's, hold gold's live rows in files apart, as
    maintenance keeps them: the next hour's MERGEs need not rewrite the history's settled rows
    (a late record may still change one: then its file is rewritten)."""
    landing, lake_dir = tmp_path / "landing", str(tmp_path / "lake")
    generate(landing, 80, 80, "uniform", seed=4, files=1)
    for rebuild in (False, True):
        pipeline.run(spark, None if rebuild else str(landing), lake_dir, max_quarantine_ratio=1.0, rebuild=rebuild)
        kinds = {name: list(kinds_by_file(spark, lake_dir, name).values()) for name in LIVE}
        assert all(len(k) == 1 for name in LIVE for k in kinds[name]), rebuild
        assert [set().union(*kinds[name]) for name in ("messages", "subscriptions")] == [{True, False}] * 2


def test_usage_errors(tmp_path, capsys):
    assert cli.main(["maintain", "--lake", str(tmp_path / "missing")]) == 2
    for bad in ("-1", "inf", "soon"):
        with pytest.raises(SystemExit):
            cli.main(["maintain", "--lake", str(tmp_path), "--retain-hours", bad])


def test_an_hour_of_other_keys_reads_no_settled_file_of_gold(spark, lake_dir, tmp_path):
    """After maintenance, an hour of a tenant of its own reads none of gold's files that hold
    no live row: its MERGEs' bounds (the touched keys, the deadlines a status refresh crosses)
    skip them. Moved away during the run, they are not missed."""
    landing, lake_dir, _, _ = lake_dir
    as_of_ms = table_rows(lake_dir, "as_of")[0]["as_of"]
    settled = [file for name in LIVE for file, kinds in kinds_by_file(spark, lake_dir, name).items()
               if kinds == {False}]
    assert settled  # the history's rows a run no longer changes
    generate(landing, 40, 40, "uniform", seed=3, files=1, first_position=2 * 10 ** 6,
             start_ms=BASE_MS + 2 * 3_600_000, tenant_id="next-hour")  # a later hour: statuses cross
    with moved_away(settled, tmp_path):
        result = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    assert result.new_messages == 40 and result.as_of > as_of_ms
