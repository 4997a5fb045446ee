"""Join hints: a run's small frames are broadcast, so the history they meet is not shuffled;
and a checkpoint that forgets its plan's size estimate (`without_estimate`)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.config import BROADCAST_ROWS


def broadcast_if_small(*frames: DataFrame):
    """`F.broadcast` if every frame has at most `BROADCAST_ROWS` rows, else the identity.

    The frames are counted whole: give checkpointed frames or narrow ones over them. (Not
    with a LIMIT: Spark names a LIMIT's counter anew in each query, so its generated class
    would be compiled again in every run.) A hint changes plans, never results.
    """
    return hint_for(max(df.count() for df in frames))


def hint_for(rows: int):
    """The hint for a frame of `rows` rows: `F.broadcast` up to `BROADCAST_ROWS`, else the identity."""
    return F.broadcast if rows <= BROADCAST_ROWS else (lambda df: df)


def without_estimate(df: DataFrame) -> DataFrame:
    """`df` checkpointed, with Spark's default size estimate rather than its plan's: an
    estimate carried through self-joins round after round grows past what the planner can
    multiply in reasonable time (docs/performance.md, *What the code does for speed*)."""
    checkpoint = df.localCheckpoint()._jdf
    spark = df.sparkSession
    return DataFrame(spark._jsparkSession.createDataFrame(checkpoint.rdd(), checkpoint.schema()), spark)
