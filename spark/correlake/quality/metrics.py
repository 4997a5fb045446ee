"""The conditions of the suites in `expectations/`, measured by Spark.

Each expectation of a suite bounds one metric: how many rows of the suite's frame break
a condition, given in the expectation's `meta` as a SQL predicate on the frame (`rows`)
or as columns that no two rows may share (`repeats`; rows with all of them null aside,
as GX's uniqueness expectations skip them). One Spark query per gate counts every
condition of its suites (`measure`); GX validates the one-row frame of counts. The rows
that break a failed condition are looked up afterwards, for the report (`examples`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from correlake.config import expectations_dir

EXAMPLES = 5  # rows named in a failure's report, per condition


@dataclass(frozen=True)
class Condition:
    metric: str  # the column of the metrics frame (its expectation's `column`)
    rows: str | None  # the rows that break it, as a SQL predicate on the frame; or
    repeats: tuple[str, ...] | None  # the columns no two rows share
    rule: str | None  # the rule of semantics.md it checks, if one

    def count(self) -> Column:
        """How many rows break it (of repeated ones: those after the first of each value)."""
        if self.rows is not None:
            return F.count_if(F.expr(self.rows))
        present = reduce(lambda a, b: a | b, (F.col(c).isNotNull() for c in self.repeats))
        return F.count_if(present) - F.count_distinct(F.when(present, F.struct(*self.repeats)))

    def describe(self) -> str:
        return f"rows where {self.rows}" if self.rows is not None else \
            f"rows repeating another's ({', '.join(self.repeats)})"

    def examples(self, frame: DataFrame, keys: list[str]) -> list[dict]:
        """Some rows that break it, as text: by their keys and the columns the condition reads
        (repeated values: with how many rows share each)."""
        if self.rows is not None:
            read = [c for c in frame.columns if c not in keys and re.search(rf"\b{re.escape(c)}\b", self.rows)]
            bad = frame.where(F.expr(self.rows)).select(*keys, *read).orderBy(*keys)
        else:
            bad = frame.dropna("all", subset=list(self.repeats)).groupBy(*self.repeats).count() \
                .where("count > 1").orderBy(*self.repeats)
        return [{k: None if v is None else str(v) for k, v in row.asDict().items()}
                for row in bad.select(*(F.col(c).cast("string") for c in bad.columns)).limit(EXAMPLES).collect()]


@cache
def suite_spec(name: str) -> dict:
    """Suite `name` as written in `expectations/<name>.json`."""
    return json.loads((expectations_dir() / f"{name}.json").read_text())


@cache
def conditions(name: str) -> dict[str, Condition]:
    """The conditions of suite `name`, by metric."""
    found = {}
    for e in suite_spec(name)["expectations"]:
        meta, metric = e.get("meta", {}), e["kwargs"]["column"]
        if ("rows" in meta) == ("repeats" in meta):
            raise ValueError(f"suite {name!r}, metric {metric!r}: give its rows or its repeats, one of them")
        repeats = meta.get("repeats")
        found[metric] = Condition(metric, meta.get("rows"), repeats and tuple(repeats), meta.get("rule"))
    return found


def measure(frames: dict[str, DataFrame]) -> dict[str, dict[str, int]]:
    """Every condition of the suites of these frames counted in one Spark query: by suite, by metric."""
    per_suite = [frame.agg(F.lit(name).alias("suite"), F.to_json(F.struct(
        *(c.count().alias(m) for m, c in conditions(name).items()))).alias("metrics")) for name, frame in frames.items()]
    return {row.suite: json.loads(row.metrics) for row in reduce(DataFrame.unionAll, per_suite).collect()}
