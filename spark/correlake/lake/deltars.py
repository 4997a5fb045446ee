"""The lake's tables through delta-rs, without Spark or a JVM, where they are: a folder
or object storage (`objectstore.storage_options`)."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, QueryBuilder, write_deltalake
from pyspark.sql.types import StructType

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


def query(sql: str, tables: dict[str, DeltaTable]) -> pa.Table:
    """A SQL query over `tables` registered under their aliases, run by delta-rs's own
    engine (DataFusion). Not pyarrow's dataset scan: its threads, left reading through
    delta-rs's file system, made about one process in two abort at exit ("terminate called
    without an active exception"), after its work was done. Strings may come as `string_view`."""
    builder = QueryBuilder()
    for alias, table in tables.items():
        builder.register(alias, table)
    return pa.table(builder.execute(sql))


def read(table: DeltaTable, columns: list[str]) -> pa.Table:
    """`columns` of every row of `table` (`query`)."""
    return select(table, columns, "TRUE")


def select(table: DeltaTable | None, columns: list[str], where: str) -> pa.Table | None:
    """`columns` of the rows of `table` where `where` (a DataFusion condition) holds, None
    without a table (`query`)."""
    if table is None:
        return None
    quoted = ", ".join(f'"{c}"' for c in columns)
    return query(f"SELECT {quoted} FROM t WHERE {where}", {"t": table})


def listed(values) -> str:
    """`values` (strings or integers) as the list of a DataFusion `IN (…)`: strings quoted."""
    return ", ".join(str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'" for v in values)


def tuples(rows: pa.Table) -> list[tuple]:
    """The rows of an Arrow table as tuples of Python values, in its column order."""
    return list(zip(*(column.to_pylist() for column in rows.columns), strict=True))


def rows_in(table: DeltaTable | None, columns: list[str], column: str, values: set, schema: pa.Schema | None = None
            ) -> pa.Table | None:
    """`columns` of the rows of `table` whose `column` is one of `values` (strings or
    integers), as `schema` if given (None without a table or values). The filter lets
    delta-rs skip the files whose statistics hold none of them."""
    if table is None or not values:
        return None
    return _as(select(table, columns, f'"{column}" IN ({listed(sorted(values))})'), schema)


def _as(found: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
    """`found` as `schema`, or its `string_view`s as strings (pyarrow filters no string_view)."""
    return found.cast(schema or pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f
                                           for f in found.schema]))


def rows_of_keys(table: DeltaTable | None, columns: list[str], keys: set[tuple[str, str]]) -> pa.Table | None:
    """`columns` of the rows of `table` whose (tenant_id, correlation_key) is one of `keys`
    (`select`ed by their tenants and correlation keys, so that files are skipped by either's
    statistics; the pairs are matched here)."""
    if table is None or not keys:
        return None
    tenants, correlation_keys = (listed(sorted(set(values))) for values in zip(*keys, strict=True))
    found = _as(select(table, list(dict.fromkeys([*columns, "tenant_id", "correlation_key"])),
                       f'"tenant_id" IN ({tenants}) AND "correlation_key" IN ({correlation_keys})'))
    pairs = tuples(found.select(["tenant_id", "correlation_key"]))
    return found.filter(pa.array([pair in keys for pair in pairs], pa.bool_())).select(columns)


def millis(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A timestamp column as epoch millis (int64)."""
    return column.cast(pa.timestamp("ms", column.type.tz), safe=False).cast(pa.int64())


def as_millis(rows: pa.Table) -> pa.Table:
    """`rows` with their times as epoch millis."""
    return pa.table([millis(c) if pa.types.is_timestamp(c.type) else c for c in rows.columns],
                    names=rows.column_names)


def arrow_schema(struct: StructType) -> pa.Schema:
    """A table schema as Arrow (times: microseconds, UTC), as Spark writes it."""
    from pyspark.sql.pandas.types import to_arrow_schema  # no JVM: the type mapping only
    return to_arrow_schema(struct, timezone="UTC")


def from_rows(struct: StructType, rows: list[tuple]) -> pa.Table:
    """`rows` (times in epoch millis) as an Arrow table of schema `struct`."""
    schema = arrow_schema(struct)
    columns = list(zip(*rows)) or [()] * len(schema)
    return pa.table([pa.array(column, pa.timestamp("ms", "UTC") if pa.types.is_timestamp(field.type)
                              else field.type).cast(field.type)
                     for column, field in zip(columns, schema)], schema=schema)


class Detail(NamedTuple):
    files: int             # active data files
    bytes: int             # their size
    features: set[str]     # the table features (reader's and writer's)
    properties: dict[str, str]  # the table's properties (`delta.…` settings)


def detail(lake: str, name: str) -> Detail:
    """The lake's table `name` at its latest version as Delta's `DESCRIBE DETAIL` gives it,
    read from the log without a Spark job."""
    found = table(lake, name)
    files, protocol = pa.table(found.get_add_actions(flatten=False)), found.protocol()
    return Detail(files.num_rows, sum(files["size_bytes"].to_pylist()),
                  {*(protocol.reader_features or ()), *(protocol.writer_features or ())},
                  dict(found.metadata().configuration))


def restore(lake: str, name: str, version: int) -> None:
    """The lake's table `name` brought back to its `version` in a new commit (Delta's
    `RESTORE`: the files of that version added again, the later ones removed)."""
    table(lake, name).restore(version)


def write(lake: str, name: str, rows: pa.Table, mode: str = "append", run_id: str | None = None) -> None:
    """Append `rows` to the lake's table `name` or replace its rows with them (`mode`),
    creating it if need be; a run's commit carries its id, as the run's Spark commits do
    (`userMetadata`)."""
    properties = CommitProperties(custom_metadata={"userMetadata": run_id}) if run_id else None
    write_deltalake(table_path(lake, name), rows, mode=mode, storage_options=_options(lake),
                    commit_properties=properties)
