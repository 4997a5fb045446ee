"""The driver backend: a run's work in this process (docs/design.md, *Backends*).

Silver's rows it needs are looked up with delta-rs in the run's snapshot (files skipped by
their statistics), the scope rules applied to them as Python sets (`driver_scope.py`, the
twins of `transforms/scope.py`), rule 7 and the engine run by `sequential_pass_on_driver`,
and the results handed on as local frames: no Spark job joins the run with the history.
Its twin is `spark.Spark`."""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from correlake.config import table_path
from correlake.contract.ordering import may_share_a_line
from correlake.contract.schemas import KEY_GROUPS, MESSAGE_FIELDS, OUTBOX, SCOPE, TOUCHED
from correlake.lake import deltars
from correlake.lake import restate as restating
from correlake.run.backends.base import DRIVER, Scope, driver_room
from correlake.run.backends.driver_scope import plan
from correlake.run.backends.spark import Spark, not_replayed
from correlake.transforms import gold, silver
from correlake.transforms.sequential import sequential_pass_on_driver

if TYPE_CHECKING:
    from correlake.run.backends.base import Run


def _in_driver(df: DataFrame, key: str, order: list[str], out_schema, per_key) -> DataFrame:
    """`sequential_pass`'s signature, run by `sequential_pass_on_driver` (rows sorted by `order`)."""
    return sequential_pass_on_driver(df, key, itemgetter(*order), out_schema, per_key)


class Driver:
    """The `Backend` of a run planned on the driver (`backends.choose`)."""
    name = DRIVER

    def __init__(self, run: Run):
        self.run = run

    def plan_scope(self, new_messages: DataFrame, new_events: DataFrame, deployments: DataFrame,
                   redeployed: bool) -> Scope:
        """`driver_scope.plan`'s scope as local frames (TooLargeForDriver past `driver_room`)."""
        run, spark = self.run, self.run.spark
        planned = plan(run, new_messages, new_events,
                       not run.result.rebuild and run.plan.versions["silver_messages"] >= 0, redeployed,
                       driver_room(run.plan))
        routed = StructType([*new_events.schema.fields, StructField("label", StringType())])
        return Scope(spark.createDataFrame(planned.key_group_changes, KEY_GROUPS),
                     spark.createDataFrame(deltars.from_rows(TOUCHED, planned.touched), TOUCHED),
                     spark.createDataFrame(planned.message_records, new_messages.select(*MESSAGE_FIELDS).schema),
                     spark.createDataFrame(planned.routed_events, routed), planned.touched_groups)

    def accepted_messages(self, records: DataFrame) -> DataFrame:
        return silver.accepted_messages(records, _in_driver)

    def run_engine(self, events: DataFrame, deployments: dict[str, list[dict]]) -> DataFrame:
        return gold.run_engine_in_driver(events, deployments)

    def touched(self) -> dict[tuple[str, str], int | None]:
        """The touched keys with their replay points (epoch millis), fetched into this process."""
        found = self.run.frame("touched_keys").select(*SCOPE, "since").toArrow()
        return {(t, k): since for t, k, since in deltars.tuples(deltars.as_millis(found))}

    def refreshed(self, rows: DataFrame, crossed: DataFrame, touched: dict[tuple[str, str], int | None],
                  since: str) -> DataFrame:
        """Joined with the run's touched keys (a local frame): a filter of them in literals
        cost a call to the JVM for each key (seconds for a thousand keys)."""
        return rows.unionByName(not_replayed(crossed, self.run.frame("touched_keys"), since).select(*rows.columns))

    def restate(self, name: str, rows: DataFrame, touched: dict[tuple[str, str], int | None] | None,
                keys: list[str], also: str | None = None) -> None:
        """The MERGE's source computed here (`lake/restate.changes_on_driver`), Spark running the MERGE alone."""
        spark, lake = self.run.spark, self.run.lake_dir
        fetched = rows.toArrow()
        if touched is None:
            touched = dict.fromkeys(deltars.tuples(fetched.select(SCOPE)))
        found = restating.changes_on_driver(lake, name, fetched, touched, keys)
        schema = StructType([*rows.schema.fields, StructField("_op", StringType(), False)])
        source = spark.createDataFrame(found, schema)
        within = restating.bounds(restating.key_ranges(touched), also)
        restating.merge(spark, table_path(lake, name), source, found.num_rows, within, rows.columns, keys)

    def outbox_of_touched(self, correlations: DataFrame, keys: DataFrame) -> tuple[DataFrame, DataFrame]:
        """The keys' outbox events looked up by delta-rs; if a key's line may hold other keys
        (`may_share_a_line`: rare), the Spark backend's join, which finds those keys' rows."""
        run, fetched = self.run, set(deltars.tuples(keys.select(*SCOPE).toArrow()))
        if any(may_share_a_line(key) for _, key in fetched):
            return Spark(run).outbox_of_touched(correlations, keys)
        found = deltars.rows_of_keys(deltars.table(run.lake_dir, "outbox", run.plan.versions["outbox"]),
                                     OUTBOX.fieldNames(), fetched)
        return correlations, run.spark.createDataFrame([] if found is None else found, OUTBOX)

    def append(self, df: DataFrame, name: str) -> None:
        """Fetched and committed by delta-rs: no Spark job plans the write and lists the table."""
        rows = df.toArrow()  # its files' columns nullable, as Spark writes them (readers of files compare schemas)
        deltars.write(self.run.lake_dir, name, rows.cast(pa.schema([f.with_nullable(True) for f in rows.schema])),
                      "append", self.run.run_id)
