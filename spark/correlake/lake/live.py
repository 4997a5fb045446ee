"""Gold's live rows: the rows a later run can change without late input — a message still
buffered at the lake's as_of (semantics rule 23: its status crosses, it may correlate again),
a subscription still open, an instance started by a message still running. A MERGE rewrites
every file that holds a row it changes, and an hour changes live rows: a table whose files
each hold only live rows or only the others has its hour rewrite the few live files, not
the history's. Its first version is written so (`apart`), and `correlake maintain` keeps
it so (`run/maintenance._split`)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from correlake.lake.sqlfiles import buffered, instant

# The live rows of each such table, as SQL on its columns (`{as_of}`: the lake's as_of).
LIVE_ROWS = {"messages": buffered("{as_of}"), "subscriptions": "closed_at IS NULL",
             "message_started_instances": "ended_at IS NULL"}


def is_live(name: str, as_of: int | None) -> Column:
    """Whether a row of table `name` (one of LIVE_ROWS) is live at `as_of` (epoch millis)."""
    return F.coalesce(F.expr(LIVE_ROWS[name].format(as_of=instant(as_of or 0))), F.lit(False))


def apart(df: DataFrame, name: str, as_of: int | None) -> DataFrame:
    """`df`'s rows, the live ones (of a table of LIVE_ROWS at `as_of`) in partitions of their
    own, so in files of their own once written; no shuffle. Other tables' rows as they are."""
    if name not in LIVE_ROWS:
        return df
    live = is_live(name, as_of)
    return df.where(live).unionByName(df.where(~live))
