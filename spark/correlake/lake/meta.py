"""What the lake records about its runs (`_meta/ingested_files`, `_meta/runs`), and the
small reads of it a run starts with, made with delta-rs: a few files read in this
process, no Spark job."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from correlake.contract.schemas import INGESTED_FILES, RUNS
from correlake.lake.deltars import from_rows, listed, read, select, tuples, write
from correlake.lake.deltars import table as _table


def _columns(table: DeltaTable, *columns: str) -> pa.Table:
    return read(table, list(columns))


def columns(lake: str, name: str) -> list[str]:
    """The column names of the lake's table `name` ([] if it has none)."""
    table = _table(lake, name)
    return [] if table is None else [field.name for field in table.schema().fields]


def latest(lake: str, name: str, column: str, version: int | None = None) -> int | None:
    """The greatest instant in a table's timestamp column, in epoch millis (None: no table
    or no value)."""
    table = _table(lake, name, version)
    if table is None:
        return None
    top = pc.max(pc.cast(_columns(table, column)[column], pa.timestamp("ms", "UTC"), safe=False)).as_py()
    return None if top is None else int(top.timestamp() * 1000)


def ingested(lake: str, after: dict[str, str] | None = None) -> set[tuple]:
    """The (path, size, modified_at) of every landing file ingested so far; with `after`, only
    of each stream's paths from its path there on (a range: delta-rs skips the table's files
    whose statistics hold none)."""
    table = _table(lake, "ingested_files")
    if table is None:
        return set()
    columns = ["path", "size", "modified_at"]
    if after is None:
        return set(tuples(_columns(table, *columns)))
    where = " OR ".join(f'("stream" = {listed([stream])} AND "path" >= {listed([mark])})'
                        for stream, mark in after.items())
    return set(tuples(select(table, columns, where)))


def records_read(lake: str) -> int:
    """How many landing records the lake's runs have read so far."""
    table = _table(lake, "runs")
    return 0 if table is None else pc.sum(_columns(table, "records_read")["records_read"]).as_py() or 0


def last_event_time(lake: str) -> int | None:
    """The max event time seen by the lake's runs so far (epoch millis)."""
    return latest(lake, "runs", "max_event_time")


def record_ingested(lake: str, rows: list[tuple], run_id: str) -> None:
    """Append the rows of the files a run ingested to `_meta/ingested_files` (through delta-rs;
    none: no empty commit, but the table is created, as a lake has every table)."""
    if rows or _table(lake, "ingested_files") is None:
        write(lake, "ingested_files", from_rows(INGESTED_FILES, rows), run_id=run_id)


def record_run(lake: str, row: tuple) -> None:
    """Append a run's row (`RunResult.runs_row`) to `_meta/runs`, tagged with its run id
    (through delta-rs: no Spark job at the end of a run's write)."""
    write(lake, "runs", from_rows(RUNS, [row]), run_id=row[0])
