"""Text bound for a terminal or a log, with its control characters escaped: a data value
or a file name cannot recolour, move the cursor, retitle the window or rewrite a line
already shown. C0 controls, DEL and C1 controls become `\\n`, `\\r`, `\\t` or `\\xNN`;
every other character, Unicode included, is left as it is. And text bound for Spark SQL:
a value as a string literal (`sql_string`)."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
_LINE_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but the line break
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    return _NAMED.get(char) or f"\\x{ord(char):02x}"


def escape(value: str) -> str:
    """A value (a cell, a file name) on one line: every control character escaped."""
    return _CONTROLS.sub(_escaped, value)


def escape_lines(text: str) -> str:
    """A message of one or more lines: its line breaks kept, every other control escaped."""
    return _LINE_CONTROLS.sub(_escaped, text)


class _EscapingStream:
    """A text stream that writes through `escape_lines` to the one it wraps."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escape_lines(text))
        return len(text)

    def __getattr__(self, name):  # flush, fileno, isatty, encoding…: the wrapped stream's
        return getattr(self._stream, name)


@contextmanager
def escaped_output():
    """Within the block, what is written to sys.stdout and sys.stderr has its control
    characters escaped (the line breaks kept)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _EscapingStream(sys.stdout), _EscapingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def sql_string(value: str) -> str:
    """`value` as a Spark SQL string literal: quoted, its backslashes and quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
