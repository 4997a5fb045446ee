"""`correlake sql`: a read-only Spark SQL query over a lake's tables and views, printed
as an aligned table or written to a CSV or Parquet file (`analysis/query.py`, on the
warm driver if one serves)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from correlake.config import absolute
from correlake.errors import EXIT_OK, UsageError
from correlake.interfaces import options

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("sql", help="query a lake's tables and analyst views with Spark SQL",
                         description="Run one read-only Spark SQL statement over the lake's tables (gold_messages, "
                                     "silver_messages, quarantine, runs, …) and the views of sql/views/.")
    options.add_lake(parser)
    parser.add_argument("query", nargs="?", help="the SQL (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN)")
    parser.add_argument("--list", action="store_true", help="list the tables and views with the question each answers")
    parser.add_argument("--limit", type=options.positive, default=50, help="rows to print (default 50)")
    parser.add_argument("--out", type=options.out_file, help="write every row to this file instead (.csv or .parquet)")
    parser.add_argument("--format", choices=sorted(set(FORMATS.values())), help="file format of --out")
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.analysis import query
    from correlake.driver import client
    from correlake.lake import catalog

    if args.list:
        catalog.require_gold(args.lake)
        print(listing(args.lake))
        return EXIT_OK
    if not args.query:
        raise UsageError("give a query, or --list")
    fmt = _out_format(args.out, args.format) if args.out else None
    catalog.require_gold(args.lake)
    if warning := catalog.unfinished_warning(args.lake):
        print(warning, file=sys.stderr)
    print(client.call(query.answer, absolute(args.lake), args.query, args.limit,
                      absolute(args.out) if args.out else None, fmt))
    return EXIT_OK


def listing(lake: str) -> str:
    """Names a query can use: the lake's tables, then the views over them and their questions."""
    from correlake.lake.catalog import TABLE_NAMES, present, views

    names = present(lake)
    width = max(map(len, [*TABLE_NAMES, *views()]))
    return "\n".join(["tables:", *(f"  {name}" for name in TABLE_NAMES if name in names), "views:",
                      *(f"  {v.name:<{width}}  {v.question}" for v in views().values() if v.name in names)])


def _out_format(path: str, fmt: str | None) -> str:
    fmt = fmt or FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {path}: name it .csv or .parquet, or give --format")
    return fmt
