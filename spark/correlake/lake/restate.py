"""Restating table rows with the Delta MERGE of `sql/restate.sql`."""

from __future__ import annotations

import functools
import itertools
import operator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.contract.schemas import SCOPE
from correlake.lake.sqlfiles import delta_table, fill
from correlake.runtime.hints import broadcast_if_small, hint_for

_views = itertools.count()


def changes(target: DataFrame, rows: DataFrame, touched: DataFrame, keys: list[str]) -> DataFrame:
    """What makes the target's rows of the `touched` keys exactly `rows`: each row of
    `rows` that the target does not hold as it is (`_op` 'U'), and the `keys` of each
    target row of those keys that `rows` no longer has (`_op` 'D'). Rows already right
    are left out, so that a MERGE of these changes rewrites only the files that hold
    a row that changes (Delta rewrites every file where its source matches a row)."""
    current = (target.join(touched, SCOPE, "left_semi").select(*rows.columns)
               .localCheckpoint())  # the target is read once
    same = functools.reduce(operator.and_, (F.col(f"s.`{c}`").eqNullSafe(F.col(f"t.`{c}`")) for c in rows.columns))
    differing = rows.alias("s").join(current.alias("t"), same, "left_anti")
    gone = current.join(broadcast_if_small(rows)(rows.select(*keys)), keys, "left_anti").select(*keys)
    return (differing.withColumn("_op", F.lit("U"))
            .unionByName(gone.withColumn("_op", F.lit("D")), allowMissingColumns=True))


def restate(spark: SparkSession, target_path: str, rows: DataFrame, touched: DataFrame, keys: list[str]) -> None:
    """Make the target's rows for the `touched` keys exactly `rows` (no commit when every
    row is already right).

    `rows` are the new rows of the (tenant_id, correlation_key)s in `touched` (and may
    carry rows of other keys, which update theirs: a run that moves as_of); target rows
    of the touched keys that are not in `rows` are deleted; the others are untouched.
    `touched` comes with its join hint (`broadcast_if_small`), which the caller decides
    once for every table it restates.
    """
    columns = rows.columns
    source = changes(spark.read.format("delta").load(target_path), rows, touched, keys).localCheckpoint()
    if not (changed := source.count()):
        return
    view = f"correlake_changes_{next(_views)}"
    hint_for(changed)(source).createOrReplaceTempView(view)
    try:
        spark.sql(fill(
            "restate",
            target=delta_table(target_path),
            changes=view,
            match=" AND ".join(f"t.`{k}` = s.`{k}`" for k in keys),
            assignments=", ".join(f"t.`{c}` = s.`{c}`" for c in columns if c not in keys),
            columns=", ".join(f"`{c}`" for c in columns),
            values=", ".join(f"s.`{c}`" for c in columns),
        ))
    finally:
        spark.catalog.dropTempView(view)
