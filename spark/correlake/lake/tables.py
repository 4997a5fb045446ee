"""Thin readers and writers of the lake's Delta tables (the run lock: `lock.py`; the
journal that makes a run all-or-nothing: `journal.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from correlake.config import DELETION_VECTOR_TABLES, table_path
from correlake.lake.files import names, written_at

if TYPE_CHECKING:  # the CLI reads versions without importing Spark
    from pyspark.sql import DataFrame


def is_table(path: str) -> bool:
    return version(path) >= 0


def version(path: str) -> int:
    """The table's latest version (-1 if none), from its commit files: no Spark job."""
    commits = [int(name[:-5]) for name in names(f"{path}/_delta_log") if name.endswith(".json") and name[:-5].isdigit()]
    return max(commits, default=-1)


def latest_commit(path: str) -> tuple[int, float]:
    """The table's latest version and when its commit was written ((-1, 0) if none): a
    version of a table told apart from the same number of one deleted and made again."""
    latest = version(path)
    written = written_at(f"{path}/_delta_log/{latest:020d}.json") if latest >= 0 else None
    return latest, written or 0.0


def _writer(df: DataFrame, run_id: str):
    return df.write.format("delta").option("userMetadata", run_id)


def append(df: DataFrame, lake: str, name: str, run_id: str) -> None:
    """Add `df`'s rows to the table."""
    _writer(df, run_id).mode("append").save(table_path(lake, name))


def overwrite(df: DataFrame, lake: str, name: str, run_id: str, new_schema: bool = False) -> None:
    """Replace the table's content (a new version, history kept), with the same schema
    unless `new_schema`."""
    _writer(df, run_id).option("overwriteSchema", str(new_schema).lower()).mode("overwrite").save(
        table_path(lake, name))


def create(df: DataFrame, lake: str, name: str, run_id: str) -> None:
    """Create the table with `df` as its first version (deletion vectors on for some, see
    DELETION_VECTOR_TABLES)."""
    deletion_vectors = str(name in DELETION_VECTOR_TABLES).lower()
    _writer(df, run_id).option("delta.enableDeletionVectors", deletion_vectors).save(table_path(lake, name))
