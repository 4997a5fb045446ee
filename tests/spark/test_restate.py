"""Restating a table's rows: the MERGE's source (only the rows that change) is the same
whether Spark computes it (`changes`) or a small run's driver does (`changes_on_driver`),
and either backend's `restate` leaves the table holding exactly the new rows of the touched keys."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from support.helpers import moved_away

from correlake.config import table_path
from correlake.contract.schemas import GOLD, GOLD_KEYS
from correlake.lake import deltars
from correlake.lake import restate as restating
from correlake.run.backends.driver import Driver
from correlake.run.backends.spark import Spark, Touched

SCHEMA, KEYS = GOLD["subscriptions"], GOLD_KEYS["subscriptions"]
T0 = datetime(2026, 9, 21, 14, 0, tzinfo=UTC)


def row(tenant: str, key: str, element: str, close_reason: str | None = None, count: int = 0) -> tuple:
    """A subscription row (nulls in the columns a row may leave empty)."""
    closed = T0.replace(minute=5) if close_reason else None
    return (tenant, element, "pay", "order", 1, f"p{element}", "catch", "RECEIVE_TASK", key, True, T0, closed,
            close_reason, count)


BEFORE = [
    row("t1", "k1", "e1"),                                  # right as it is
    row("t1", "k2", "e2"),                                  # closed by the run
    row("t1", "k3", "e3"),                                  # gone: its key's new rows lack it
    row("t1", "it's", "e4"),                                # a quote in the key; correlated by the run
    row("t1", "a\\b", "e6"),                               # a backslash in the key; closed by the run
    row("t2", "k1", "e1"),                                  # the same key of another tenant: not touched
    row("t1", "k9", "e9"),                                  # a key not touched
]
AFTER = [
    row("t1", "k1", "e1"),
    row("t1", "k2", "e2", "CORRELATED", 1),
    row("t1", "k4", "e5"),                                  # new
    row("t1", "it's", "e4", "CORRELATED", 1),
    row("t1", "a\\b", "e6", "CORRELATED", 1),
]
TOUCHED = {("t1", "k1"), ("t1", "k2"), ("t1", "k3"), ("t1", "k4"), ("t1", "it's"), ("t1", "a\\b")}


def lake_with_rows(spark, lake) -> str:
    spark.createDataFrame(BEFORE, SCHEMA).write.format("delta").save(table_path(str(lake), "subscriptions"))
    return str(lake)


def table(spark, lake: str) -> set[tuple]:
    return set(deltars.tuples(spark.read.format("delta").load(table_path(lake, "subscriptions")).toArrow()))


def test_the_driver_and_spark_find_the_same_changes_and_restate_the_same_rows(spark, tmp_path):
    lakes = {how: lake_with_rows(spark, tmp_path / how) for how in ("spark", "driver")}
    rows = spark.createDataFrame(AFTER, SCHEMA)
    touched = spark.createDataFrame(sorted(TOUCHED), "tenant_id string, correlation_key string")

    by_spark = restating.changes(spark.read.format("delta").load(table_path(lakes["spark"], "subscriptions")),
                                 rows, touched, KEYS)
    by_driver = restating.changes_on_driver(lakes["driver"], "subscriptions", rows.toArrow(),
                                           dict.fromkeys(TOUCHED), KEYS)
    assert set(deltars.tuples(by_spark.toArrow())) == set(deltars.tuples(by_driver))
    assert sorted(op for *_, op in deltars.tuples(by_driver)) == ["D", "U", "U", "U", "U"]  # k1's row left out

    Spark(SimpleNamespace(spark=spark, lake_dir=lakes["spark"])).restate("subscriptions", rows, Touched.of(touched),
                                                                        KEYS)
    Driver(SimpleNamespace(spark=spark, lake_dir=lakes["driver"])).restate("subscriptions", rows,
                                                                          dict.fromkeys(TOUCHED), KEYS)
    untouched = {r for r in BEFORE if (r[0], r[8]) not in TOUCHED}
    assert table(spark, lakes["spark"]) == table(spark, lakes["driver"]) == set(AFTER) | untouched


def test_a_small_run_restating_rows_already_right_commits_nothing(spark, tmp_path):
    lake = lake_with_rows(spark, tmp_path / "lake")
    before = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(lake, 'subscriptions')}`").count()
    rows = spark.createDataFrame([r for r in BEFORE if r[0] == "t1"], SCHEMA)
    Driver(SimpleNamespace(spark=spark, lake_dir=lake)).restate("subscriptions", rows, None, KEYS)  # the rows' keys
    assert spark.sql(f"DESCRIBE HISTORY delta.`{table_path(lake, 'subscriptions')}`").count() == before
    assert table(spark, lake) == set(BEFORE)


def test_a_merge_reads_only_the_files_that_may_hold_its_keys(spark, tmp_path):
    """The MERGE's condition bounds the target by the touched tenants and their key ranges in
    literals (`bounds`): files of another tenant, or of keys past the range, are not read
    (moved away during the MERGE, they are not missed)."""
    lake = str(tmp_path / "lake")
    path, files = table_path(lake, "subscriptions"), []  # the files' URIs, in the order written
    for rows in ([r for r in BEFORE if r[0] == "t1"], [row("t2", "k1", "e1")], [row("t1", "z9", "e9")]):
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("delta").mode("append").save(path)
        files.append(next(f for f in deltars.table(lake, "subscriptions").file_uris() if f not in files))
    rows = spark.createDataFrame(AFTER, SCHEMA)
    with moved_away(files[1:], tmp_path):
        Driver(SimpleNamespace(spark=spark, lake_dir=lake)).restate("subscriptions", rows, dict.fromkeys(TOUCHED), KEYS)
    assert table(spark, lake) == set(AFTER) | {row("t1", "k9", "e9"), row("t2", "k1", "e1"), row("t1", "z9", "e9")}


def test_bounds_name_each_tenant_up_to_a_bound_then_ranges():
    assert restating.bounds({"t1": ("a", "k'4"), "t0": ("b\\", "c")}) == (
        "((t.`tenant_id` = 't0' AND t.`correlation_key` BETWEEN 'b\\\\' AND 'c') OR "
        "(t.`tenant_id` = 't1' AND t.`correlation_key` BETWEEN 'a' AND 'k\\'4'))")
    many = {f"t{i:03}": (f"k{i}", f"k{i + 5}") for i in range(restating.BOUNDED_TENANTS + 1)}
    assert restating.bounds(many, "t.`x` > 1") == ("((t.`tenant_id` BETWEEN 't000' AND 't100' AND "
                                                   "t.`correlation_key` BETWEEN 'k0' AND 'k99') OR (t.`x` > 1))")
    assert restating.bounds({}) == "(FALSE)"
