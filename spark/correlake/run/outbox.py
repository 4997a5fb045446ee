"""A run's new outbox events: which gold correlations and which outbox events the
transform (`transforms/outbox.py`) is given. Those of the keys the run recomputed; every
key's on a rebuild, and on a lake that has no outbox yet (made before it: its first run
gets every gold correlation's event); with a delivery delay, also the keys whose
held-back correlations fell due since the last run's as_of (the rules:
`transforms/outbox.py`). The keys' past events, and the rows of other keys that share an
ordering line with them, are the run's backend's to find (`outbox_of_touched`). Also the
migration of an outbox written before contract revision 3."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.config import DELIVERY_PARTITIONS, delivery_delay_ms, table_path
from correlake.contract.ordering import ordering_key_column
from correlake.contract.schemas import CORRELATION, OUTBOX, SCOPE, struct
from correlake.lake import meta, tables
from correlake.lake.journal import journalled
from correlake.run.backends import Spark
from correlake.transforms.outbox import backfilled, due_correlations, outbox_events

if TYPE_CHECKING:
    from correlake.run.backends import Backend
    from correlake.run.backends.base import Snapshot


def new_events(run: Snapshot, backend: Backend, run_id: str, as_of: int | None,
               previous_as_of: Callable[[], int | None], correlations: DataFrame | None = None,
               touched: DataFrame | None = None, rebuild: bool = False) -> tuple[DataFrame, bool]:
    """(the run's new outbox rows, whether they are a first outbox's backfill of gold).

    `run.history(name)`: a lake table as the run found it (None: none); `backend`: the run's,
    which gives the past events of the keys (`outbox_of_touched`); `correlations`: the
    run's gold correlations of the `touched` keys (None: a run that recomputed none);
    `previous_as_of()`: the as_of gold's statuses were at before the run."""
    delay = delivery_delay_ms()
    due_until = None if delay == 0 or as_of is None else as_of - delay
    empty = run.spark.createDataFrame
    new = empty([], CORRELATION) if correlations is None else correlations
    keys = empty([], struct(*((name, CORRELATION[name].dataType) for name in SCOPE))) if touched is None else touched
    outbox, gold = run.history("outbox"), run.history("correlations")
    if rebuild or outbox is None:  # every key: the run's correlations, the others' from gold
        backfill = outbox is None and gold is not None
        if backfill and not rebuild:
            new = backfilled(gold, new, keys)
        past = empty([], OUTBOX) if outbox is None else outbox
        return outbox_events(new, past, run_id, DELIVERY_PARTITIONS, due_until), backfill
    if due_until is not None and gold is not None:
        previous = previous_as_of()
        due = due_correlations(gold, keys, None if previous is None else previous - delay, due_until
                               ).localCheckpoint()  # read for its rows and for its keys
        new, keys = new.unionByName(due), keys.unionByName(due.select(*SCOPE).distinct())
    new, past = backend.outbox_of_touched(new, keys)
    return outbox_events(new, past, run_id, DELIVERY_PARTITIONS, due_until), False


def needs_migration(lake: str) -> bool:
    """Whether the lake's outbox was written before contract revision 3 (no `ordering_key`)."""
    found = meta.columns(lake, "outbox")
    return bool(found) and "ordering_key" not in found


def migrate(spark: SparkSession, lake: str, run_id: str) -> int | None:
    """An outbox written before contract revision 3 brought to it: every event gets its
    ordering key, and keeps its event_id, sequence, partition and payload (nothing already
    sent changes); one journalled rewrite, once. Returns how many events it holds (None:
    the lake needed nothing)."""
    if not needs_migration(lake):
        return None
    events = spark.read.format("delta").load(table_path(lake, "outbox"))
    migrated = events.withColumn("ordering_key", ordering_key_column(F.col("correlation_key"), F.col("message_key"))
                                 ).select(*OUTBOX.fieldNames()).localCheckpoint()
    with journalled(spark, lake, run_id):
        tables.overwrite(migrated, lake, "outbox", run_id, new_schema=True)
    return migrated.count()


@dataclass(frozen=True)
class Current:
    """The lake's tables as they are (`base.Snapshot`): what a status refresh reads, having no
    run's snapshot."""
    spark: SparkSession
    lake_dir: str

    def history(self, name: str) -> DataFrame | None:
        path = table_path(self.lake_dir, name)
        return self.spark.read.format("delta").load(path) if tables.is_table(path) else None


def due_on_refresh(spark: SparkSession, lake_dir: str, run_id: str, as_of: int, previous_as_of: int
                   ) -> DataFrame | None:
    """A status refresh's outbox events (as_of moved, nothing new): those of the held-back
    correlations now due, checkpointed; None without a delivery delay or an outbox."""
    if not delivery_delay_ms() or not tables.is_table(table_path(lake_dir, "outbox")):
        return None
    lake = Current(spark, lake_dir)
    return new_events(lake, Spark(lake), run_id, as_of, lambda: previous_as_of)[0].localCheckpoint()
