"""The Spark backend: a run's work as Spark jobs over silver's key columns (docs/design.md,
*Backends*): the scope rules of `transforms/scope.py` as joins, rule 7 and the engine in
Spark's Python workers, the restating MERGEs' sources and the outbox's past events joined,
each frame read again checkpointed and each small one broadcast. Its twin is `driver.Driver`."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.caches import history_keys
from correlake.config import table_path
from correlake.contract.ordering import may_share_a_line_column, ordering_key_column
from correlake.contract.schemas import SCOPE
from correlake.lake import restate as restating
from correlake.lake import tables
from correlake.run.backends.base import SPARK, Scope
from correlake.run.backends.replay import GOLD_COLUMNS
from correlake.run.backends.spark_scope import recompute, replayed
from correlake.runtime.hints import broadcast_if_small
from correlake.semantics.quiet import SINCE_COLUMNS
from correlake.transforms import gold, silver
from correlake.transforms.scope import HistoryKeys, message_records
from correlake.transforms.sequential import sequential_pass

if TYPE_CHECKING:
    from correlake.run.backends.base import Run


def hinted(keys: DataFrame) -> DataFrame:
    """`keys` with its join hint, decided once for every table it restates."""
    return broadcast_if_small(keys)(keys)


class Touched(NamedTuple):
    """Touched (tenant_id, correlation_key)s as the Spark backend restates by them: the keys
    with their join hint, and each tenant's range of them (`lake/restate.key_ranges_of`),
    both found once for every table it restates."""
    keys: DataFrame
    ranges: dict[str, tuple[str, str]]

    @classmethod
    def of(cls, keys: DataFrame) -> Touched:
        keys = hinted(keys)
        return cls(keys, restating.key_ranges_of(keys.select(*SCOPE)))


class Spark:
    """The `Backend` of a run planned on Spark (`backends.choose`), or given to it by the driver;
    and a status refresh's, whose `run` is the lake as it is (`base.Snapshot`), for `outbox_of_touched`."""
    name = SPARK

    def __init__(self, run: Run):
        self.run = run

    def plan_scope(self, new_messages: DataFrame, new_events: DataFrame, deployments: DataFrame,
                   redeployed: bool) -> Scope:
        """`spark_scope.recompute` over silver's key columns (as this process cached them, or read)."""
        run = self.run
        old = (lambda name: None) if run.result.rebuild else run.history  # noqa: E731
        old_messages = old("silver_messages")
        old_messages = None if old_messages is None else message_records(old_messages)
        old_events = old("silver_workflow_events")
        if old_messages is None and old_events is None:  # a first run, a rebuild
            keys = None
        elif (keys := history_keys.cached(run.lake_dir, run.plan.versions)) is None:
            old_key_groups = old("key_groups")  # read now: each lookup joins it
            keys = HistoryKeys.read(old_messages, old_events,
                                    None if old_key_groups is None else old_key_groups.localCheckpoint())
        work = recompute(new_messages, new_events, old_messages, old_events, keys, deployments, redeployed)
        gold = None if keys is None or redeployed else {name: old(name) for name in GOLD_COLUMNS}
        touched, messages, routed = replayed(work, gold, new_messages, new_events)
        return Scope(work.key_group_changes, touched, messages, routed,
                     work.scope.select("tenant_id", "label").distinct().count(), work.history_after)

    def accepted_messages(self, records: DataFrame) -> DataFrame:
        return silver.accepted_messages(records, sequential_pass)

    def run_engine(self, events: DataFrame, deployments: dict[str, list[dict]]) -> DataFrame:
        return gold.run_engine(events, deployments).localCheckpoint()  # gold's tables each read it

    def touched(self) -> Touched:
        return Touched.of(self.run.frame("touched_keys").select(*SCOPE, "since"))

    def refreshed(self, rows: DataFrame, crossed: DataFrame, touched: Touched, since: str) -> DataFrame:
        """`crossed`'s rows but those of the `touched` keys at or after their replay points."""
        return rows.unionByName(not_replayed(crossed, touched.keys, since).select(*rows.columns)
                                ).localCheckpoint()  # `changes` reads it twice

    def restate(self, name: str, rows: DataFrame, touched: Touched | None, keys: list[str],
                also: str | None = None) -> None:
        """The MERGE's source joined (`lake/restate.changes`), checkpointed and counted."""
        spark, path = self.run.spark, table_path(self.run.lake_dir, name)
        since = None if touched is None else SINCE_COLUMNS.get(name)
        touched = Touched.of(rows.select(*SCOPE)) if touched is None else touched
        source = restating.changes(spark.read.format("delta").load(path), rows, touched.keys, keys, since
                                   ).localCheckpoint()
        restating.merge(spark, path, source, source.count(), restating.bounds(touched.ranges, also), rows.columns,
                        keys)

    def outbox_of_touched(self, correlations: DataFrame, keys: DataFrame) -> tuple[DataFrame, DataFrame]:
        """The outbox joined with the keys, then `_shared_lines`."""
        outbox, gold, keys = self.run.history("outbox"), self.run.history("correlations"), hinted(keys)
        past = outbox.join(keys, SCOPE, "left_semi").select(*outbox.columns)  # the outbox's column order
        return (correlations, past) if gold is None else _shared_lines(correlations, past, gold, outbox, keys)

    def append(self, df: DataFrame, name: str) -> None:
        tables.append(df, self.run.lake_dir, name, self.run.run_id)


def not_replayed(rows: DataFrame, touched: DataFrame, since: str) -> DataFrame:
    """`rows` (with SCOPE and time column `since`) but those of the `touched` keys (SCOPE,
    `since`: their replay points) at or after their replay points: a join, whatever the keys' number."""
    replayed = touched.select(*SCOPE, F.col("since").alias("_since"), F.lit(True).alias("_touched"))
    return rows.join(replayed, SCOPE, "left").where(
        F.col("_touched").isNull() | (F.col("_since").isNotNull() & (F.col(since) < F.col("_since"))))


def _shared_lines(new: DataFrame, past: DataFrame, gold: DataFrame, outbox: DataFrame,
                  keys: DataFrame) -> tuple[DataFrame, DataFrame]:
    """`new` and `past` with the gold correlations and outbox events of keys outside `keys`
    whose ordering key is one of theirs (an empty key's `#<message_key>` line, and a key
    that reads the same): the transform is given every row of the lines it renumbers.
    Only rows that `may_share_a_line` are looked at. `keys` come with their join hint."""
    def shared(df: DataFrame) -> DataFrame:
        return df.where(may_share_a_line_column(F.col("correlation_key"))).withColumn(
            "_line", ordering_key_column(F.col("correlation_key"), F.col("message_key")))

    line = ["tenant_id", "_line"]
    lines = shared(new).select(*line).unionByName(shared(past).select(*line)).distinct().localCheckpoint()
    lines = broadcast_if_small(lines)(lines)

    def others(df: DataFrame) -> DataFrame:
        return (shared(df).join(lines, line, "left_semi").join(keys, SCOPE, "left_anti")
                .select(*df.columns))

    return new.unionByName(others(gold)), past.unionByName(others(outbox))
