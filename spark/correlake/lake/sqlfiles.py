"""The SQL kept in `sql/`, loaded and filled in."""

from __future__ import annotations

import re
from functools import cache

from correlake.config import sql_dir


@cache
def load(name: str) -> str:
    """Text of `sql/<name>.sql` without its leading comment lines."""
    lines = (sql_dir() / f"{name}.sql").read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()


def fill(name: str, **params) -> str:
    """`sql/<name>.sql` with its placeholders filled: `params`, and the rules of `sql/rules/`
    as `{buffered[<instant>]}` (see `buffered`; in the instant, a SQL expression, each name
    of `params` stands for its value)."""
    return load(name).format(buffered=_BufferedAt(params), **params)


def buffered(at: str, ttl_ms: str = "ttl_ms", deadline: str = "deadline") -> str:
    """The predicate of `sql/rules/buffered.sql` (rules 6, 7, 23): buffered at the instant
    `at`, over the columns named (SQL expressions all three)."""
    return "(" + load("rules/buffered").format(at=at, ttl_ms=ttl_ms, deadline=deadline) + ")"


class _BufferedAt:
    """`{buffered[as_of]}` in a SQL file: `buffered(params["as_of"])`, or `buffered("as_of")`
    (a column) when `as_of` is not a parameter; `{buffered[least(before, after)]}`: the
    parameters `before` and `after` in the expression (not a qualified name's `t.after`)."""

    def __init__(self, params: dict):
        self.params = params

    def __getitem__(self, at: str) -> str:
        return buffered(re.sub(r"(?<![.\w])\w+", lambda name: str(self.params.get(name[0], name[0])), at))


def instant(millis: int | None) -> str:
    """An instant (epoch millis, None: unknown) as a Spark SQL TIMESTAMP literal expression."""
    return "CAST(NULL AS TIMESTAMP)" if millis is None else f"timestamp_millis({int(millis)})"


def message_status(as_of: int | None) -> str:
    """A gold/messages row's status at `as_of`, epoch millis (`sql/message_status.sql`)."""
    return fill("message_status", as_of=instant(as_of))


def delta_table(path: str) -> str:
    """The Delta table at `path` as Spark SQL names it: delta.`<path>` (backticks doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"
