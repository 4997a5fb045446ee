"""`gold/as_of`: the one instant at which gold/messages' statuses are evaluated (semantics
rule 23, contract revision 2), how a run moves it, and the migration of lakes that kept it
on every gold/messages row (revision 1)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.config import table_path
from correlake.contract.schemas import AS_OF
from correlake.lake import deltars, meta, tables
from correlake.lake.journal import journalled
from correlake.lake.sqlfiles import delta_table, fill, instant, message_status


def record(lake: str, as_of: int | None, run_id: str) -> None:
    """Make gold/as_of's one row `as_of` (epoch millis; None while the lake has no record),
    set by `run_id`; created if the lake has no gold/as_of yet. Through delta-rs: a commit
    of one small file, where Spark's overwrite first computes the table's state (5 Spark
    jobs, 2–4 s). The caller journals the write."""
    deltars.write(lake, "as_of", deltars.from_rows(AS_OF, [(as_of, run_id)]), mode="overwrite", run_id=run_id)


def value(frame: DataFrame | None) -> int | None:
    """The as_of of a gold/as_of frame (epoch millis), None if there is none."""
    return None if frame is None else frame.agg(F.max(F.unix_millis("as_of"))).first()[0]


def current(lake: str, version: int | None = None) -> int | None:
    """The lake's as_of (at gold/as_of's `version`, else now), None if it has none (yet)."""
    return meta.latest(lake, "as_of", "as_of", version)


def moves(lake: str, as_of: int | None, last_event_time: int | None) -> tuple[int | None, int | None]:
    """Where a run with nothing new leaves gold's statuses: (the as_of it evaluates them at,
    `as_of` if given, else the last event time; the lake's as_of before, if that moves it,
    else None)."""
    target = as_of if as_of is not None else last_event_time
    before = current(lake)
    return target, before if None not in (target, before) and target != before else None


def needs_migration(lake: str) -> bool:
    """Whether the lake is of contract revision 1: an `as_of` column on gold/messages."""
    return "as_of" in meta.columns(lake, "messages")


def crosses(before: int, after: int) -> str:
    """The predicate of a gold/messages row whose status crosses when as_of moves from
    `before` to `after` (`sql/rules/crosses.sql`)."""
    return "(" + fill("rules/crosses", before=instant(before), after=instant(after), status=message_status(after)) + ")"


def may_cross(before: int, after: int) -> str:
    """A condition in literals on a MERGE's target (`t`) that each gold/messages row whose
    status crosses from `before` to `after` meets (`crosses`): its deadline after the earlier
    instant and not after the later. Delta skips the files whose statistics fail it."""
    return (f"t.`deadline` > {instant(min(before, after))} AND t.`deadline` <= {instant(max(before, after))}")


def refresh(spark: SparkSession, lake: str, before: int, after: int) -> int:
    """Move gold/messages' statuses from `before` to `after`: an UPDATE of the rows whose status
    crosses (`sql/refresh_statuses.sql`), not a rewrite of the table. Returns how many crossed."""
    return spark.sql(fill("refresh_statuses", target=delta_table(table_path(lake, "messages")),
                          crosses=crosses(before, after), status=message_status(after))).first()[0]


def crossed(messages: DataFrame, before: int, after: int) -> DataFrame:
    """The rows of `messages` (gold/messages) whose status crosses from `before` to `after`,
    with their status at `after`: what a run's MERGE carries along with its own rows."""
    return messages.where(F.expr(crosses(before, after))).withColumn("status", F.expr(message_status(after)))


def migrate(spark: SparkSession, lake: str, run_id: str) -> bool:
    """A lake of contract revision 1 (an `as_of` column on gold/messages) brought to revision 2:
    its as_of recorded in gold/as_of and the column dropped, in one journalled step (one
    rewrite of gold/messages, once). False if the lake needed nothing."""
    if not needs_migration(lake):
        return False
    messages = spark.read.format("delta").load(table_path(lake, "messages"))
    with journalled(spark, lake, run_id):
        record(lake, value(messages), run_id)
        tables.overwrite(messages.drop("as_of"), lake, "messages", run_id, new_schema=True)
    return True
