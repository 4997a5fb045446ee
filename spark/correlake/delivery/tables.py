"""The delivery tables through delta-rs (no Spark, no JVM): the outbox read at its published
version, `delivery/state` merged by `event_id`, `delivery/attempts` appended."""

from __future__ import annotations

from functools import cache

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable, write_deltalake

from correlake.config import DELIVERY_COMPACT_FILES, table_path
from correlake.contract import schemas

# The outbox's columns a pass needs for every event (never `payload`: read for the sent ones only)
OUTBOX_KEYS = ("event_id", "tenant_id", "correlation_key", "message_key", "sequence")
OUTBOX_BODY = ("event_id", "kind", "partition", "payload")


@cache
def arrow_schema(name: str) -> pa.Schema:
    """A delivery table's schema as Arrow (times: microseconds, UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # no JVM: the type mapping only

    struct = {"outbox": schemas.OUTBOX, "delivery_state": schemas.DELIVERY_STATE,
              "delivery_attempts": schemas.DELIVERY_ATTEMPT}[name]
    return to_arrow_schema(struct, timezone="UTC")


def _table(lake: str, name: str, version: int | None = None) -> DeltaTable | None:
    path = table_path(lake, name)
    if not DeltaTable.is_deltatable(path):
        return None
    return DeltaTable(path) if version is None else DeltaTable(path, version=version)


class Outbox:
    """The outbox at one version: every event's ordering columns, and the bodies of given
    events, read from the files that hold them only."""

    def __init__(self, lake: str, version: int):
        table = _table(lake, "outbox", version)
        self.fragments = list(table.to_pyarrow_dataset().get_fragments()) if table else []

    def keys(self) -> tuple[pa.Table, pa.Array]:
        """OUTBOX_KEYS of every event, and the index of the file each is in."""
        parts = [f.to_table(columns=list(OUTBOX_KEYS)) for f in self.fragments]
        files = pa.array([i for i, part in enumerate(parts) for _ in range(part.num_rows)], pa.int32())
        if not parts:
            return arrow_schema("outbox").empty_table().select(list(OUTBOX_KEYS)), files
        return pa.concat_tables(parts), files

    def bodies(self, by_file: dict[int, list[str]]) -> dict[str, dict]:
        """OUTBOX_BODY of the events named per file index, by event_id."""
        found = {}
        for file, ids in by_file.items():
            part = self.fragments[file].to_table(columns=list(OUTBOX_BODY),
                                                 filter=ds.field("event_id").isin(ids))
            found.update((row["event_id"], row) for row in part.to_pylist())
        return found


def read_state(lake: str) -> pa.Table:
    table = _table(lake, "delivery_state")
    return table.to_pyarrow_table() if table else arrow_schema("delivery_state").empty_table()


def read_attempts(lake: str, event_ids: list[str]) -> pa.Table:
    """The attempts of these events (event_id, at, outcome)."""
    table = _table(lake, "delivery_attempts")
    if table is None or not event_ids:
        return arrow_schema("delivery_attempts").empty_table().select(["event_id", "at", "outcome"])
    return table.to_pyarrow_dataset().to_table(columns=["event_id", "at", "outcome"],
                                               filter=ds.field("event_id").isin(event_ids))


def _rows(name: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(name))


def append_state(lake: str, rows: list[dict]) -> None:
    """Add rows of events not in `delivery/state` yet (no MERGE: they are new)."""
    if rows:
        write_deltalake(table_path(lake, "delivery_state"), _rows("delivery_state", rows), mode="append")


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
        write_deltalake(table_path(lake, "delivery_attempts"), _rows("delivery_attempts", rows), mode="append")


def compact(lake: str) -> list[str]:
    """Compact the delivery tables that have more than DELIVERY_COMPACT_FILES files (each
    round adds one or two), with a checkpoint: which ones were."""
    done = []
    for name in ("delivery_state", "delivery_attempts"):
        table = _table(lake, name)
        if table is not None and len(table.file_uris()) > DELIVERY_COMPACT_FILES:
            table.optimize.compact()
            table.create_checkpoint()
            done.append(name)
    return done


def table_id(lake: str, name: str) -> str | None:
    """The table's id (a new one if it is deleted and made again); None: no table."""
    table = _table(lake, name)
    return table.metadata().id if table else None


def status_counts(state: pa.Table) -> dict[str, int]:
    counts = pc.value_counts(state["status"]).to_pylist() if state.num_rows else []
    return {c["values"]: c["counts"] for c in counts}
