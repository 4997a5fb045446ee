"""The delivery tables through delta-rs (no Spark, no JVM): the outbox read at its published
version, `delivery/state` merged by `event_id`, `delivery/attempts` appended."""

from __future__ import annotations

from functools import cache

import pyarrow as pa
import pyarrow.dataset as ds

from correlake.config import DELIVERY_COMPACT_FILES
from correlake.contract import schemas
from correlake.lake.deltars import arrow_schema as _arrow_schema
from correlake.lake.deltars import listed, query, write
from correlake.lake.deltars import table as _table

# The outbox's columns a pass needs for every event (never `payload`: read for the sent ones only)
OUTBOX_KEYS = ("event_id", "tenant_id", "correlation_key", "message_key", "sequence")
OUTBOX_BODY = ("event_id", "kind", "correlation_key", "partition", "payload")


@cache
def arrow_schema(name: str) -> pa.Schema:
    """A delivery table's schema as Arrow (times: microseconds, UTC)."""
    return _arrow_schema({"outbox": schemas.OUTBOX, "delivery_state": schemas.DELIVERY_STATE,
                          "delivery_attempts": schemas.DELIVERY_ATTEMPT}[name])


class Outbox:
    """The outbox at one version, read by file (pyarrow streams each through its filter:
    the rows kept are held, not the file), on the calling thread: pyarrow's scan threads,
    left reading through delta-rs's file system, made processes abort at exit ("terminate
    called without an active exception", `lake/deltars.read`)."""

    def __init__(self, lake: str, version: int):
        self.lake, self.version = lake, version
        table = _table(lake, "outbox", version)
        self.fragments = _fragments(table)

    def ids(self, since: int | None = None) -> pa.ChunkedArray | None:
        """Every event's id; with `since` (an earlier version), those of the files added
        after it: None if a file of that version is gone (the table was rewritten)."""
        fragments = self.fragments
        if since is not None:
            if since > self.version:
                return None
            before = {f.path for f in _fragments(_table(self.lake, "outbox", since))}
            if not before <= {f.path for f in self.fragments}:
                return None
            fragments = [f for f in self.fragments if f.path not in before]
        return pa.chunked_array([_read(f, ["event_id"])["event_id"] for f in fragments], pa.string())

    def keys(self, event_ids: pa.Array) -> pa.Table:
        """OUTBOX_KEYS of these events, and `file`: the index of the file each is in."""
        wanted = ds.field("event_id").isin(event_ids)
        parts = [_read(f, OUTBOX_KEYS, wanted) for f in self.fragments]
        parts = [part.append_column("file", pa.repeat(pa.scalar(i, pa.int32()), part.num_rows))
                 for i, part in enumerate(parts)]
        empty = arrow_schema("outbox").empty_table().select(list(OUTBOX_KEYS))
        return pa.concat_tables(parts) if parts else empty.append_column("file", pa.array([], pa.int32()))

    def bodies(self, by_file: dict[int, list[str]]) -> dict[str, dict]:
        """OUTBOX_BODY of the events named per file index, by event_id."""
        found = {}
        for file, ids in by_file.items():
            part = _read(self.fragments[file], OUTBOX_BODY, ds.field("event_id").isin(ids))
            found.update((row["event_id"], row) for row in part.to_pylist())
        return found


def _read(fragment, columns, where=None) -> pa.Table:
    return fragment.to_table(columns=list(columns), filter=where, use_threads=False)


def _fragments(table) -> list:
    """A table's data files as pyarrow fragments (none: no table)."""
    return list(table.to_pyarrow_dataset().get_fragments()) if table else []


def _query(lake: str, names: dict[str, str], sql: str) -> pa.Table | None:
    """A SQL query over delivery tables registered under the given aliases (`deltars.query`;
    not pyarrow's filters, which refuse the string_view columns delta-rs's MERGE writes);
    None if one of them does not exist yet."""
    tables = {alias: _table(lake, name) for alias, name in names.items()}
    return None if None in tables.values() else query(sql, tables)


def read_state(lake: str, columns: list[str] | None = None, statuses: tuple[str, ...] | None = None) -> pa.Table:
    """`delivery/state`'s `columns` (default: all), of the events in `statuses` (default: all)."""
    schema = arrow_schema("delivery_state")
    columns = columns or schema.names
    where = f" WHERE status IN ({listed(statuses)})" if statuses else ""
    found = _query(lake, {"s": "delivery_state"}, f"SELECT {', '.join(columns)} FROM s{where}")
    target = pa.schema([schema.field(c) for c in columns])
    return target.empty_table() if found is None else found.cast(target)


def read_attempts(lake: str, statuses: tuple[str, ...]) -> pa.Table:
    """The attempts (event_id, at, outcome) of the events in `statuses` that have any."""
    sql = ("SELECT a.event_id, a.at, a.outcome FROM a JOIN s ON a.event_id = s.event_id "
           f"WHERE s.status IN ({listed(statuses)}) AND s.attempts > 0")
    found = _query(lake, {"a": "delivery_attempts", "s": "delivery_state"}, sql)
    target = arrow_schema("delivery_attempts")
    target = pa.schema([target.field(c) for c in ("event_id", "at", "outcome")])
    return target.empty_table() if found is None else found.cast(target)


def _rows(name: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(name))


def append_state(lake: str, rows: list[dict]) -> None:
    """Add rows of events not in `delivery/state` yet (no MERGE: they are new)."""
    if rows:
        write(lake, "delivery_state", _rows("delivery_state", rows))


def merge_state(lake: str, rows: list[dict]) -> None:
    """Upsert rows of `delivery/state` by event_id: only the files that hold them are rewritten."""
    if not rows:
        return
    table = _table(lake, "delivery_state")
    if table is None:
        return append_state(lake, rows)
    (table.merge(_rows("delivery_state", rows), predicate="t.event_id = s.event_id", source_alias="s",
                 target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())


def append_attempts(lake: str, rows: list[dict]) -> None:
    if rows:
        write(lake, "delivery_attempts", _rows("delivery_attempts", rows))


def prune_attempts(lake: str, final: tuple[str, ...], before, dry_run: bool) -> int:
    """Remove (dry run: count) the rows of `delivery/attempts` of the events whose status is
    one of `final` since before `before` (the state's `updated_at`): one rewrite of the table."""
    keep = (f"NOT EXISTS (SELECT 1 FROM s WHERE s.event_id = a.event_id AND s.status IN ({listed(final)}) "
            f"AND s.updated_at < TIMESTAMP '{before.isoformat()}')")
    kept = _query(lake, {"a": "delivery_attempts", "s": "delivery_state"}, f"SELECT a.* FROM a WHERE {keep}")
    if kept is None:
        return 0
    gone = _query(lake, {"a": "delivery_attempts"}, "SELECT count(*) AS n FROM a")["n"][0].as_py() - kept.num_rows
    if gone and not dry_run:
        write(lake, "delivery_attempts", kept.cast(arrow_schema("delivery_attempts")), mode="overwrite")
    return gone


def compact(lake: str, every: bool = False) -> list[str]:
    """Compact the delivery tables that have more than DELIVERY_COMPACT_FILES files (each
    batch adds one or two; `every`: all of them), with a checkpoint, and vacuum them (the
    table's retention, 7 days by default, enforced): which ones were."""
    done = []
    for name in ("delivery_state", "delivery_attempts"):
        table = _table(lake, name)
        if table is not None and (every or len(table.file_uris()) > DELIVERY_COMPACT_FILES):
            table.optimize.compact()
            table.create_checkpoint()
            table.vacuum(dry_run=False)
            done.append(name)
    return done


def table_id(lake: str, name: str) -> str | None:
    """The table's id (a new one if it is deleted and made again); None: no table."""
    table = _table(lake, name)
    return table.metadata().id if table else None


def status_counts(lake: str) -> dict[str, int]:
    """How many events `delivery/state` has in each status."""
    found = _query(lake, {"s": "delivery_state"}, "SELECT status, count(*) AS n FROM s GROUP BY status")
    return {} if found is None else {row["status"]: row["n"] for row in found.to_pylist()}
