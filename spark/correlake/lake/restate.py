"""Restating table rows with the Delta MERGE of `sql/restate.sql`."""

from __future__ import annotations

import itertools

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.transforms.hints import broadcast_if_small
from correlake.contract.schemas import SCOPE
from correlake.lake.sqlfiles import delta_table, fill

_views = itertools.count()


def restate(spark: SparkSession, target_path: str, rows: DataFrame, touched: DataFrame, keys: list[str]) -> None:
    """Make the target's rows for the `touched` keys exactly `rows`.

    `rows` are the new rows of the (tenant_id, correlation_key)s in `touched`; target
    rows of those keys that are not in `rows` are deleted; the others are untouched.
    """
    columns = rows.columns
    hint = broadcast_if_small(touched, rows)
    target = spark.read.format("delta").load(target_path)
    gone = (target.join(hint(touched), SCOPE, "left_semi")
            .join(hint(rows.select(*keys)), keys, "left_anti")
            .select(*keys))
    changes = hint(rows.withColumn("_op", F.lit("U"))
                   .unionByName(gone.withColumn("_op", F.lit("D")), allowMissingColumns=True))
    view = f"correlake_changes_{next(_views)}"
    changes.createOrReplaceTempView(view)
    try:
        spark.sql(fill(
            "restate",
            target=delta_table(target_path),
            changes=view,
            match=" AND ".join(f"t.`{k}` = s.`{k}`" for k in keys),
            unchanged=" AND ".join(f"t.`{c}` <=> s.`{c}`" for c in columns),
            assignments=", ".join(f"t.`{c}` = s.`{c}`" for c in columns if c not in keys),
            columns=", ".join(f"`{c}`" for c in columns),
            values=", ".join(f"s.`{c}`" for c in columns),
        ))
    finally:
        spark.catalog.dropTempView(view)
