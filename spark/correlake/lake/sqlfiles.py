"""The SQL kept in `sql/`, loaded and filled in."""

from __future__ import annotations

from functools import cache

from correlake.config import sql_dir


@cache
def load(name: str) -> str:
    """Text of `sql/<name>.sql` without its leading comment lines."""
    lines = (sql_dir() / f"{name}.sql").read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()


def fill(name: str, **params) -> str:
    """`sql/<name>.sql` with its {placeholders} filled in."""
    return load(name).format(**params)


def delta_table(path: str) -> str:
    """The Delta table at `path` as Spark SQL names it: delta.`<path>` (backticks doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"
