"""A run's new outbox events: which gold correlations and which outbox events the
transform (`transforms/outbox.py`) is given. Those of the keys the run recomputed; every
key's on a rebuild, and on a lake that has no outbox yet (made before it: its first run
gets every gold correlation's event); with a delivery delay, also the keys whose
held-back correlations fell due since the last run's as_of; and those of other keys that
share an ordering key with them. Also the migration of an outbox written before
contract revision 3."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.config import DELIVERY_PARTITIONS, delivery_delay_ms, table_path
from correlake.contract.ordering import may_share_a_line_column, ordering_key_column
from correlake.contract.schemas import CORRELATION, OUTBOX, SCOPE, struct
from correlake.lake import meta, tables
from correlake.lake.journal import journalled
from correlake.runtime.hints import broadcast_if_small
from correlake.transforms.outbox import due_keys, outbox_events

if TYPE_CHECKING:
    from correlake.run.backends import Backend


def new_events(spark: SparkSession, history: Callable[[str], DataFrame | None], run_id: str, as_of: int | None,
               previous_as_of: Callable[[], int | None], correlations: DataFrame | None = None,
               touched: DataFrame | None = None, rebuild: bool = False,
               backend: Backend | None = None) -> tuple[DataFrame, bool]:
    """(the run's new outbox rows, whether they are a first outbox's backfill of gold).

    `history(name)`: a lake table as the run found it (None: none); `correlations`: the
    run's gold correlations of the `touched` keys (None: a run that recomputed none);
    `previous_as_of()`: the as_of gold's statuses were at before the run; `backend`: the
    run's, which may look the touched keys' past events up by key (`outbox_of_touched`;
    None: the outbox is joined with them here)."""
    delay = delivery_delay_ms()
    due_until = None if delay == 0 or as_of is None else as_of - delay
    empty = lambda schema: spark.createDataFrame([], schema)  # noqa: E731
    new = empty(CORRELATION) if correlations is None else correlations
    scope = empty(struct(*((name, CORRELATION[name].dataType) for name in SCOPE))) if touched is None else touched
    outbox, gold = history("outbox"), history("correlations")
    if rebuild or outbox is None:  # every key: the run's correlations, the others' from gold
        backfill = outbox is None and gold is not None
        if backfill and not rebuild:
            new = gold.join(broadcast_if_small(scope)(scope), SCOPE, "left_anti").unionByName(new)
        past = empty(OUTBOX) if outbox is None else outbox
        return outbox_events(new, past, run_id, DELIVERY_PARTITIONS, due_until), backfill
    if due_until is not None and gold is not None:
        previous = previous_as_of()
        due = (due_keys(gold, None if previous is None else previous - delay, due_until)
               .join(broadcast_if_small(scope)(scope), SCOPE, "left_anti").localCheckpoint())
        new = new.unionByName(gold.join(broadcast_if_small(due)(due), SCOPE, "left_semi"))
        scope = scope.unionByName(due)
    if due_until is None and backend is not None and (past := backend.outbox_of_touched()) is not None:
        return outbox_events(new, past, run_id, DELIVERY_PARTITIONS, due_until), False
    past = outbox.join(broadcast_if_small(scope)(scope), SCOPE, "left_semi")
    if gold is not None:
        new, past = _shared_lines(new, past, gold, outbox, scope)
    return outbox_events(new, past, run_id, DELIVERY_PARTITIONS, due_until), False


def _with_line(df: DataFrame, name: str = "ordering_key") -> DataFrame:
    return df.withColumn(name, ordering_key_column(F.col("correlation_key"), F.col("message_key")))


def _shared_lines(new: DataFrame, past: DataFrame, gold: DataFrame, outbox: DataFrame,
                  scope: DataFrame) -> tuple[DataFrame, DataFrame]:
    """`new` and `past` with the gold correlations and outbox events of keys outside the
    scope whose ordering key is one of theirs (an empty key's `#<message_key>` line, and a
    key that reads the same): the transform is given every row of the lines it renumbers.
    Only rows that `may_share_a_line` are looked at."""
    def shared(df: DataFrame) -> DataFrame:
        return _with_line(df.where(may_share_a_line_column(F.col("correlation_key"))), "_line")

    keys = ["tenant_id", "_line"]
    lines = (shared(new).select(*keys).unionByName(shared(past).select(*keys)).distinct().localCheckpoint())
    hinted, outside = broadcast_if_small(lines), broadcast_if_small(scope)

    def others(df: DataFrame) -> DataFrame:
        return (shared(df).join(hinted(lines), keys, "left_semi").join(outside(scope), SCOPE, "left_anti")
                .select(*df.columns))

    return new.unionByName(others(gold)), past.unionByName(others(outbox))


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
    migrated = _with_line(events).select(*OUTBOX.fieldNames()).localCheckpoint()
    with journalled(spark, lake, run_id):
        tables.overwrite(migrated, lake, "outbox", run_id, new_schema=True)
    return migrated.count()


def fallen_due(spark: SparkSession, lake_dir: str, run_id: str, as_of: int, previous_as_of: int) -> DataFrame | None:
    """A status refresh's outbox events (as_of moved, nothing new): the held-back
    correlations now due, checkpointed; None without a delivery delay or an outbox."""
    if not delivery_delay_ms() or not tables.is_table(table_path(lake_dir, "outbox")):
        return None

    def current(name: str) -> DataFrame | None:
        path = table_path(lake_dir, name)
        return spark.read.format("delta").load(path) if tables.is_table(path) else None

    return new_events(spark, current, run_id, as_of, lambda: previous_as_of)[0].localCheckpoint()
