"""The table cache: the lake's tables as the analyst commands read them (`lake/catalog.py`),
held at their latest versions from one call to the next on the warm driver.

A query that reads a Delta table has its planning list the table's files for data
skipping, once per read: the `explanations` view reads the gold tables a dozen times, and
on the demo's lake that was 4 of its 5 s (warm). A cached table is a local checkpoint of it:
rows Spark holds, planned at no cost (not Spark's own cache, which would also answer a run's
reads of the same version number). A table is cached while its latest commit is the one
cached (a run that commits another has the next call read it again, and drops the stale
ones: `drop_stale`); one lake at a time; only while the Delta size of the cached tables
stays within ANALYSIS_CACHE_BYTES (a larger table is read from the lake as before).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from correlake.config import ANALYSIS_CACHE_BYTES
from correlake.lake.tables import latest_commit


@dataclass(frozen=True)
class _Cached:
    commit: tuple[int, float]  # the version and when it was written
    size: int  # its Delta size, in bytes
    frame: DataFrame


_lake: str | None = None
_cached: dict[str, _Cached] = {}  # by table path


def read(spark, lake: str, path: str, prepare: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """The table at `path` of `lake` at its latest version, through `prepare` (a
    projection), cached if it fits."""
    global _lake
    if _lake != lake:
        release()
        _lake = lake
    commit = latest_commit(path)
    if path in _cached:
        if _cached[path].commit == commit:
            return _cached[path].frame
        _drop(path)
    table = prepare(spark.read.format("delta").option("versionAsOf", commit[0]).load(path))
    size = int(table._jdf.queryExecution().analyzed().stats().sizeInBytes())  # from its snapshot
    if size + sum(cached.size for cached in _cached.values()) > ANALYSIS_CACHE_BYTES:
        return table
    _cached[path] = _Cached(commit, size, table.localCheckpoint())
    return _cached[path].frame


def _drop(path: str) -> None:
    del _cached[path]  # its rows are Spark's cleaner's once the JVM collects the frame (`memory.release`)


def drop_stale(lake: str) -> None:
    """After a run of `lake`: forget the cached tables whose latest commit is another; all of
    them if they are another lake's, or if the commits cannot be listed (a store that does
    not answer: the run's own error is what its caller sees)."""
    if _lake != lake:
        release()
        return
    try:
        stale = [path for path, cached in _cached.items() if latest_commit(path) != cached.commit]
    except Exception:
        release()
        return
    for path in stale:
        _drop(path)


def release() -> None:
    """Forget every cached table."""
    global _lake
    for path in list(_cached):
        _drop(path)
    _lake = None
