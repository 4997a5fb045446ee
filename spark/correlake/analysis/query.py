"""`correlake sql`'s answer: one read-only statement over a lake's tables and views
(`read_only.py` refuses anything else), as an aligned text table or a CSV or Parquet file."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from correlake.errors import UsageError, first_line
from correlake.text import escape


def answer(spark, lake: str, text: str, limit: int, out: str | None = None, fmt: str | None = None) -> str:
    """What `correlake sql` prints: the first `limit` rows of `text`'s result as a table, or,
    with `out`, that every row was written there (`fmt`: csv or parquet)."""
    from pyspark.errors import PySparkException
    from pyspark.logger import PySparkLogger

    from correlake.analysis import read_only
    from correlake.lake import catalog

    spark_errors = PySparkLogger.getLogger("SQLQueryContextLogger")  # it would print each SQL error as JSON too
    spark_errors.disabled = True
    try:
        listed = text.lstrip().upper().startswith("SHOW")  # SHOW TABLES lists them all
        registered = catalog.register(spark, lake, None if listed else [text])
        df = read_only.query(spark, text, registered, [*catalog.TABLE_NAMES, *catalog.views()])
        return f"wrote {write(df, out, fmt)} rows to {out}" if out else show(df, limit)
    except PySparkException as exc:
        hint = " (`correlake sql --list` names them)" if exc.getCondition() == "TABLE_OR_VIEW_NOT_FOUND" else ""
        raise UsageError(first_line(exc) + hint) from None
    finally:
        spark_errors.disabled = False


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
