"""Every table of a lake as data, read with delta-rs (no Spark job): lakes that ran the same
increments compared table by table, and gold in `helpers.read_gold`'s shape."""

from __future__ import annotations

import json

import pyarrow as pa

from correlake.config import GOLD_TABLES, TABLES
from correlake.lake import deltars

# What two lakes given the same runs may hold differently: when a run ingested its files,
# and in `_meta/runs` when it started and finished and its summary (its timings, the path
# it took). Run ids are drawn per run: they are replaced by the run's number.
WHEN = frozenset({"_ingested_at"})
RUN_WHEN = frozenset({"started_at", "finished_at", "summary"})
RUN_IDS = frozenset({"_run_id", "run_id"})


def lake_rows(lake: str, run_numbers: dict[str, int]) -> dict[str, list[dict]]:
    """Every table of the lake (config.TABLES) as dicts (None: not in the lake): times as epoch
    millis, a run id as its number in `run_numbers`, WHEN's and RUN_WHEN's columns left out."""
    out = {}
    for name in TABLES:
        left_out = WHEN | RUN_WHEN if name == "runs" else WHEN
        rows = table_rows(lake, name, lambda columns, left_out=left_out: [c for c in columns if c not in left_out])
        for row in rows or []:  # None: a table the lake's kind of input never makes (a canonical lake's engine tables)
            row.update({c: run_numbers[row[c]] for c in RUN_IDS & row.keys()})
        out[name] = rows
    return out


def table_rows(lake: str, name: str, chosen=lambda columns: columns, version: int | None = None) -> list[dict] | None:
    """The rows of the lake's table `name` (at `version`, else its latest) as dicts of the
    columns `chosen` keeps of the table's (deletion vectors applied), times as epoch millis; None if
    the lake has no such table."""
    table = deltars.table(lake, name, version)
    if table is None:
        return None
    columns = chosen([f.name for f in table.schema().fields])
    fetched = deltars.read(table, columns)
    values = [_values(fetched.column(c)) for c in columns]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


def _values(column: pa.ChunkedArray) -> list:
    """A column's values, a timestamp's as epoch millis (its unit's count, scaled)."""
    if not pa.types.is_timestamp(column.type):
        return column.to_pylist()
    per_milli = {"ms": 1, "us": 1_000, "ns": 1_000_000}[column.type.unit]
    return [None if v is None else v // per_milli for v in column.cast(pa.int64()).to_pylist()]


def gold_of(rows: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """`lake_rows`' gold tables as `helpers.read_gold` gives them."""
    return {**{name: rows[name] for name in GOLD_TABLES}, "as_of": [{"as_of": r["as_of"]} for r in rows["as_of"]]}


def outbox_of(rows: dict[str, list[dict]]) -> list[dict]:
    """`lake_rows`' outbox events, each with its payload parsed (as `outbox_model.read_outbox`)."""
    return [dict(r, payload=json.loads(r["payload"])) for r in rows["outbox"]]


def differences(got: dict[str, list[dict]], want: dict[str, list[dict]]) -> dict[str, str]:
    """The tables of two `lake_rows` whose rows differ (in any order), each with a few rows
    only in one of them."""
    out = {}
    for name in sorted(want.keys() | got.keys()):
        if (got.get(name) is None) != (want.get(name) is None):
            out[name] = "in one lake only"
            continue
        g, w = (sorted(json.dumps(r, sort_keys=True) for r in rows.get(name) or []) for rows in (got, want))
        if g != w:
            only_got, only_want = sorted(set(g) - set(w)), sorted(set(w) - set(g))
            out[name] = f"{len(g)} rows against {len(w)}; only in one: {only_got[:2]}; only in the other: {only_want[:2]}"
    return out
