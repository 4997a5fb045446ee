"""The analyst commands' table cache (`lake/table_cache.py`): a table read again is the
cached one until its latest commit changes (a new version, or the table deleted and made
again with the same numbers); over the budget nothing is cached, and of one lake only."""

from __future__ import annotations

import shutil

import pytest

from correlake.lake import table_cache


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / "lake" / "t")
    spark.range(3).write.format("delta").save(path)
    yield str(tmp_path / "lake"), path
    table_cache.release()


def read(spark, lake, path):
    return table_cache.read(spark, lake, path, lambda frame: frame.withColumnRenamed("id", "n"))


def cached(frame) -> bool:
    """Whether the frame is of rows held in Spark, not a read of the table."""
    return "LogicalRDD" in frame._jdf.queryExecution().analyzed().toString()


def test_a_table_is_cached_until_its_latest_commit_changes(spark, table):
    lake, path = table
    first = read(spark, lake, path)
    assert first.columns == ["n"] and first.count() == 3 and cached(first)
    assert read(spark, lake, path) is first

    spark.range(5).write.format("delta").mode("append").save(path)
    table_cache.drop_stale(lake)
    assert table_cache._cached == {}
    second = read(spark, lake, path)
    assert second is not first and second.count() == 8 and cached(second)

    shutil.rmtree(path)  # made again, to the same version number (1)
    spark.range(7).write.format("delta").save(path)
    spark.range(2).write.format("delta").mode("append").save(path)
    again = read(spark, lake, path)
    assert again is not second and again.count() == 9 and cached(again)


def test_nothing_is_cached_over_the_budget_nor_of_another_lake(spark, table, tmp_path, monkeypatch):
    lake, path = table
    assert cached(read(spark, lake, path))
    other = str(tmp_path / "other" / "t")
    spark.range(4).write.format("delta").save(other)
    assert read(spark, str(tmp_path / "other"), other).count() == 4 and list(table_cache._cached) == [other]
    table_cache.drop_stale(lake)  # a run of another lake than the cached one's
    assert table_cache._cached == {}

    monkeypatch.setattr(table_cache, "ANALYSIS_CACHE_BYTES", 0)
    table_cache.release()
    frame = read(spark, lake, path)
    assert frame.count() == 3 and not cached(frame) and read(spark, lake, path) is not frame
