"""The partitioned-queue pattern: hash-partition on a key, sort within
partitions, then one tight Python loop per partition through `mapInArrow`; or, on the
driver backend, the same loop in the driver process (`sequential_pass_on_driver`)."""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

BATCH_ROWS = 20_000


def by_key(batches: Iterable[pa.RecordBatch], key: str) -> Iterator[tuple[object, list[dict]]]:
    """`(key value, rows)` for each run of consecutive rows with equal `key`, across batch boundaries."""
    current, rows = None, []
    for batch in batches:
        for row in batch.to_pylist():
            k = row[key]
            if rows and k != current:
                yield current, rows
                rows = []
            current = k
            rows.append(row)
    if rows:
        yield current, rows


def to_batches(rows: Iterable[dict], schema: pa.Schema, weight: Callable[[dict], int] | None = None,
               max_weight: int = 0) -> Iterator[pa.RecordBatch]:
    """Arrow batches of BATCH_ROWS rows, or fewer whose `weight`s add up to `max_weight`."""
    chunk, weighed = [], 0
    for row in rows:
        chunk.append(row)
        weighed += weight(row) if weight else 0
        if len(chunk) >= BATCH_ROWS or (weight and weighed >= max_weight):
            yield pa.RecordBatch.from_pylist(chunk, schema=schema)
            chunk, weighed = [], 0
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


def sequential_pass(df: DataFrame, key: str, order: list[str], out_schema: StructType,
                    per_key: Callable[[object, list[dict]], Iterable[dict]]) -> DataFrame:
    """Apply `per_key(key_value, sorted_rows)` to the rows of each value of `key`.

    Rows of one key reach one Python worker, sorted by `order`; the function's
    dicts become rows of `out_schema`.
    """
    arrow_schema = to_arrow_schema(out_schema)

    def run(batches):
        outputs = (out for k, rows in by_key(batches, key) for out in per_key(k, rows))
        yield from to_batches(outputs, arrow_schema)

    return (df.repartition(key)
              .sortWithinPartitions(key, *order)
              .mapInArrow(run, out_schema))


def sequential_pass_on_driver(df: DataFrame, key: str, sort_key: Callable[[dict], tuple], out_schema: StructType,
                              per_key: Callable[[object, list[dict]], Iterable[dict]]) -> DataFrame:
    """`sequential_pass` in this process, for the driver backend: fetched (one Spark
    job), sorted by `key` and `sort_key` (as Spark sorts them by `order`), `per_key`
    applied to each key's rows, and its dicts returned as a local frame (no Spark task
    reads them)."""
    rows = df.toArrow().to_pylist()
    rows.sort(key=lambda row: (row[key], sort_key(row)))
    out = [o for k, group in groupby(rows, key=itemgetter(key)) for o in per_key(k, list(group))]
    return df.sparkSession.createDataFrame(pa.Table.from_pylist(out, schema=to_arrow_schema(out_schema)), out_schema)
