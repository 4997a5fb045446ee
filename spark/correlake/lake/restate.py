"""Restating table rows with the Delta MERGE of `sql/restate.sql` (`merge`), whose source
holds only the rows that change: computed by Spark's joins (`changes`, the Spark backend's),
or by its twin `changes_on_driver` from the target's rows of the touched keys read with
delta-rs (the driver backend's: `run/backends/`). The MERGE's condition bounds the target
by literals (`bounds`), so that Delta reads only the files whose statistics may hold the
source's keys."""

from __future__ import annotations

import functools
import itertools
import operator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.config import table_path
from correlake.contract.schemas import SCOPE
from correlake.lake import deltars
from correlake.lake.sqlfiles import delta_table, fill
from correlake.runtime.hints import broadcast_if_small, hint_for
from correlake.semantics.quiet import SINCE_COLUMNS
from correlake.text import sql_string

BOUNDED_TENANTS = 100  # past this many tenants, `bounds` names their range, not each (a condition of bounded size)

_views = itertools.count()


def changes(target: DataFrame, rows: DataFrame, touched: DataFrame, keys: list[str], since: str | None = None
            ) -> DataFrame:
    """What makes the target's rows of the `touched` keys exactly `rows`: each row of
    `rows` that the target does not hold as it is (`_op` 'U'), and the `keys` of each
    target row of those keys that `rows` no longer has (`_op` 'D'). Rows already right
    are left out, so that a MERGE of these changes rewrites only the files that hold
    a row that changes (Delta rewrites every file where its source matches a row).
    `since`: the target's time column (`quiet.SINCE_COLUMNS`) if `touched` has the keys'
    replay points (`since`): a key's rows before its replay point are not its run's."""
    if since is None or "since" not in touched.columns:
        current = target.join(touched, SCOPE, "left_semi")
    else:
        current = target.join(touched.select(*SCOPE, F.col("since").alias("_since")), SCOPE).where(
            F.col("_since").isNull() | (F.col(since) >= F.col("_since")))
    current = current.select(*rows.columns).localCheckpoint()  # the target is read once
    same = functools.reduce(operator.and_, (F.col(f"s.`{c}`").eqNullSafe(F.col(f"t.`{c}`")) for c in rows.columns))
    differing = rows.alias("s").join(current.alias("t"), same, "left_anti")
    gone = current.join(broadcast_if_small(rows)(rows.select(*keys)), keys, "left_anti").select(*keys)
    return (differing.withColumn("_op", F.lit("U"))
            .unionByName(gone.withColumn("_op", F.lit("D")), allowMissingColumns=True))


def changes_on_driver(lake: str, name: str, rows: pa.Table, touched: dict[tuple[str, str], int | None],
                      keys: list[str]) -> pa.Table:
    """`changes` in this process, for the driver backend: `rows` and the `touched` (tenant_id,
    correlation_key)s in hand, the target's rows of those keys read by delta-rs (its files
    skipped by their statistics; a key's rows before its replay point, the
    value `touched` gives it, left out: `quiet.SINCE_COLUMNS`) and compared here. A deleted
    row's columns other than `keys` are null."""
    columns = rows.column_names
    new = deltars.tuples(rows)
    current = deltars.rows_of_keys(deltars.table(lake, name), columns, set(touched))
    if current is not None and (since := SINCE_COLUMNS.get(name)) and any(s is not None for s in touched.values()):
        at = deltars.millis(current[since]).to_pylist()
        current = current.filter(pa.array([(s := touched[pair]) is None or t >= s for pair, t in zip(
            deltars.tuples(current.select(SCOPE)), at, strict=True)], pa.bool_()))
    held = set() if current is None else set(deltars.tuples(current))
    at = [columns.index(k) for k in keys]
    kept = {tuple(row[i] for i in at) for row in new}
    gone = {key for row in held if (key := tuple(row[i] for i in at)) not in kept}
    found = [(*row, "U") for row in new if row not in held] + [(*_keys_only(key, at, len(columns)), "D")
                                                                 for key in gone]
    schema = rows.schema.append(pa.field("_op", pa.string(), False))
    return pa.table([pa.array(column, field.type) for column, field in
                     zip(list(zip(*found)) or [()] * len(schema), schema, strict=True)], schema=schema)


def _keys_only(key: tuple, at: list[int], width: int) -> tuple:
    row = [None] * width
    for i, value in zip(at, key, strict=True):
        row[i] = value
    return tuple(row)


def key_ranges(pairs) -> dict[str, tuple[str, str]]:
    """Each tenant's lowest and highest correlation key among (tenant_id, correlation_key) `pairs`."""
    ranges: dict[str, tuple[str, str]] = {}
    for tenant, key in pairs:
        low, high = ranges.get(tenant, (key, key))
        ranges[tenant] = (min(low, key), max(high, key))
    return ranges


def key_ranges_of(pairs: DataFrame) -> dict[str, tuple[str, str]]:
    """`key_ranges` of a DataFrame of (tenant_id, correlation_key)s, by one Spark job."""
    tenant, key = SCOPE
    return {row[0]: (row[1], row[2]) for row in pairs.groupBy(tenant).agg(F.min(key), F.max(key)).collect()}


def bounds(ranges: dict[str, tuple[str, str]], also: str | None = None) -> str:
    """A condition in literals that the target's rows of each tenant of `ranges` with a
    correlation key in its range meet (a range a tenant, or past `BOUNDED_TENANTS` tenants,
    the tenants' and the keys' ranges), or `also` (a condition on the target, `t`). Delta
    skips the files whose statistics fail it."""
    tenant, key = (f"t.`{c}`" for c in SCOPE)

    def between(column: str, low: str, high: str) -> str:
        return f"{column} BETWEEN {sql_string(low)} AND {sql_string(high)}"

    if len(ranges) > BOUNDED_TENANTS:
        lows, highs = zip(*ranges.values(), strict=True)
        parts = [f"({between(tenant, min(ranges), max(ranges))} AND {between(key, min(lows), max(highs))})"]
    else:
        parts = [f"({tenant} = {sql_string(t)} AND {between(key, low, high)})" for t, (low, high) in sorted(ranges.items())]
    parts += [f"({also})"] if also else []
    return "(" + (" OR ".join(parts) or "FALSE") + ")"


def merge(spark: SparkSession, target_path: str, source: DataFrame, changed: int, within: str,
          columns: list[str], keys: list[str]) -> None:
    """The MERGE of `sql/restate.sql` of `source`'s `changed` rows (`changes`) into the
    target: the target's rows of the source's keys made the source's, those marked 'D'
    deleted. Every target row that a source row matches meets `within` (`bounds`)."""
    if not changed:
        return
    view = f"correlake_changes_{next(_views)}"
    hint_for(changed)(source).createOrReplaceTempView(view)
    try:
        spark.sql(fill(
            "restate",
            target=delta_table(target_path),
            changes=view,
            match=" AND ".join([*(f"t.`{k}` = s.`{k}`" for k in keys), within]),
            assignments=", ".join(f"t.`{c}` = s.`{c}`" for c in columns if c not in keys),
            columns=", ".join(f"`{c}`" for c in columns),
            values=", ".join(f"s.`{c}`" for c in columns),
        ))
    finally:
        spark.catalog.dropTempView(view)


def merge_earliest(spark: SparkSession, lake: str, name: str, rows: DataFrame) -> None:
    """The MERGE of `sql/<name>.sql` of `rows` into the table `name`, which keeps, per key, the
    row of the earliest record (gold/engine_correlations: `transforms/engine_audit.py`)."""
    view = f"correlake_rows_{next(_views)}"
    rows.createOrReplaceTempView(view)
    try:
        spark.sql(fill(name, target=delta_table(table_path(lake, name)), rows=view))
    finally:
        spark.catalog.dropTempView(view)
