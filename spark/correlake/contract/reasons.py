"""Quarantine reasons by kind: without what differs from line to line (a position, a
column), as the run's summary and the report count them; each line keeps its own reason
in quarantine."""

from __future__ import annotations

import re

from correlake.text import sql_string

_LINE_DETAILS = [(re.compile(r"^conflicting position .*"), "conflicting position: differs from the record that "
                  "stands for it (each line's in quarantine)"),
                 (re.compile(r": line \d+ column \d+ \(char \d+\)"), ""),  # where in the line JSON broke
                 (re.compile(r"^unreadable gzip file after line \d+"), "unreadable gzip file after some lines")]


def reason_kind(reason: str) -> str:
    """A quarantine reason's kind."""
    for pattern, replacement in _LINE_DETAILS:
        reason = pattern.sub(replacement, reason)
    return reason


def reason_kind_sql(column: str) -> str:
    """`reason_kind` of a column, as a Spark SQL expression (Java's regexes read these patterns alike)."""
    expression = column
    for pattern, replacement in _LINE_DETAILS:
        expression = f"regexp_replace({expression}, {sql_string(pattern.pattern)}, {sql_string(replacement)})"
    return expression
