"""What the lake records about its runs: `_meta/ingested_files`, `_meta/runs`, and the
`as_of` that gold/messages' statuses were evaluated at."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from correlake.contract.schemas import INGESTED_FILES, RUNS, as_timestamps, with_millis
from correlake.lake import tables


def ingested(spark: SparkSession, lake: str) -> set[tuple]:
    """The (path, size, modified_at) of every landing file ingested so far."""
    files = tables.read(spark, lake, "ingested_files", INGESTED_FILES)
    return {(r["path"], r["size"], r["modified_at"]) for r in files.select("path", "size", "modified_at").collect()}


def last_event_time(spark: SparkSession, lake: str) -> int | None:
    """The max event time seen by the lake's runs so far (epoch millis)."""
    runs = tables.read(spark, lake, "runs", RUNS)
    return runs.agg(F.max(F.unix_millis("max_event_time"))).first()[0]


def current_as_of(messages: DataFrame) -> int | None:
    """The `as_of` of gold/messages (epoch millis; every row has the same), None if it has no rows."""
    return messages.agg(F.max(F.unix_millis("as_of"))).first()[0]


def record_run(spark: SparkSession, lake: str, row: tuple) -> None:
    """Append a run's row (`RunResult.runs_row`) to `_meta/runs`, tagged with its run id."""
    frame = as_timestamps(spark.createDataFrame([row], with_millis(RUNS)), RUNS)
    tables.append(frame, lake, "runs", row[0])
