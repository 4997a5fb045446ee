"""The lake's tables through delta-rs, without Spark or a JVM, where they are: a folder
or object storage (`objectstore.storage_options`)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from correlake.config import is_uri, table_path
from correlake.lake import objectstore


def _options(path: str) -> dict | None:
    return objectstore.storage_options() if is_uri(path) else None


def table(lake: str, name: str, version: int | None = None) -> DeltaTable | None:
    """The lake's table `name` (at `version`, else its latest), None if it has none (yet)."""
    path, options = table_path(lake, name), _options(lake)
    if version is not None and version < 0 or not DeltaTable.is_deltatable(path, storage_options=options):
        return None
    return DeltaTable(path, version=version, storage_options=options)


def append(lake: str, name: str, rows: pa.Table) -> None:
    """Append `rows` to the lake's table `name` (created if need be)."""
    write_deltalake(table_path(lake, name), rows, mode="append", storage_options=_options(lake))
