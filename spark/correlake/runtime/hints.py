"""Join hints: a run's small frames are broadcast, so the history they meet is not shuffled."""

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
