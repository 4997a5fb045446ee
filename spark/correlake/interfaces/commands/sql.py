"""`correlake sql`: a read-only Spark SQL query over a lake's tables and views, printed
as an aligned table or written to a CSV or Parquet file."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from correlake.errors import EXIT_OK, UsageError, first_line
from correlake.interfaces import options
from correlake.text import escape

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
    from pyspark.errors import PySparkException
    from pyspark.logger import PySparkLogger

    from correlake.lake import catalog
    from correlake.runtime.session import get_spark

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
    spark = get_spark()
    spark_errors = PySparkLogger.getLogger("SQLQueryContextLogger")  # it would print each SQL error as JSON too
    spark_errors.disabled = True
    try:
        listed = args.query.lstrip().upper().startswith("SHOW")  # SHOW TABLES lists them all
        catalog.register(spark, args.lake, None if listed else [args.query])
        df = run(spark, args.query)
        print(f"wrote {write(df, args.out, fmt)} rows to {args.out}" if args.out else show(df, args.limit))
    except PySparkException as exc:
        hint = " (`correlake sql --list` names them)" if exc.getCondition() == "TABLE_OR_VIEW_NOT_FOUND" else ""
        raise UsageError(first_line(exc) + hint) from None
    finally:
        spark_errors.disabled = False
    return EXIT_OK


def listing(lake: str) -> str:
    """Names a query can use: the lake's tables, then the views and their questions."""
    from correlake.config import table_path
    from correlake.lake.catalog import TABLE_NAMES, views
    from correlake.lake.tables import is_table

    tables = [name for name, table in TABLE_NAMES.items() if is_table(table_path(lake, table))]
    width = max(map(len, [*TABLE_NAMES, *views()]))
    return "\n".join(["tables:", *(f"  {name}" for name in tables), "views:",
                      *(f"  {v.name:<{width}}  {v.question}" for v in views().values())])


def run(spark, text: str):
    """The statement's DataFrame; anything but a read of the lake's tables and views is refused."""
    from correlake.interfaces import read_only
    from correlake.lake.catalog import TABLE_NAMES, views

    return read_only.query(spark, text, [*TABLE_NAMES, *views()])


def show(df, limit: int) -> str:
    """The first `limit` rows as an aligned text table (control characters escaped: `\\x1b`, `\\n`),
    and how many were left out."""
    table = df.limit(limit + 1).toArrow()
    shown = table.slice(0, limit)
    names = list(map(escape, table.column_names))
    rows = [[escape(_cell(v)) for v in values] for values in zip(*(column.to_pylist() for column in shown.columns))]
    numeric = [_is_number(t) for t in table.schema.types]
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(names)]

    def line(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    out = [line(names), line(["-" * w for w in widths]), *map(line, rows)]
    if table.num_rows > limit:
        total = df.count()
        out.append(f"({limit} of {total} rows shown; {total - limit} not shown: raise --limit or use --out FILE)")
    else:
        out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def write(df, path: str, fmt: str) -> int:
    """Write every row to one local file; return the row count."""
    import pyarrow.csv
    import pyarrow.parquet
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if fmt == "csv":  # CSV has no nested values: those become JSON text
        df = df.select(*(F.to_json(f.name).alias(f.name) if isinstance(f.dataType, (ArrayType, MapType, StructType))
                         else F.col(f.name) for f in df.schema.fields))
    table = df.toArrow()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        pyarrow.csv.write_csv(table, path)
    else:
        pyarrow.parquet.write_table(table, path)
    return table.num_rows


def _out_format(path: str, fmt: str | None) -> str:
    fmt = fmt or FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {path}: name it .csv or .parquet, or give --format")
    return fmt


def _cell(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, list):
        return "[" + ", ".join(map(_cell, value)) + "]"
    return str(value)


def _is_number(dtype) -> bool:
    import pyarrow.types as t

    return t.is_integer(dtype) or t.is_floating(dtype) or t.is_decimal(dtype)
