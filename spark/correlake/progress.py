"""Progress of long work: a line per step as it ends, with its time. Where the lines go is
the caller's choice (`to`); steps say them wherever they run (`step`), and nothing is
said when no caller listens (Airflow's tasks, CI: `config.progress_wanted`)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_listener: Callable[[str], None] | None = None
_lock = threading.Lock()  # steps may end on several threads (a gate beside the next stage)


def step(text: str) -> None:
    """Say that a step ended (`text` names it, with its time); nothing if nobody listens."""
    if _listener is not None:
        with _lock:
            _listener(text)


@contextmanager
def to(listener: Callable[[str], None] | None) -> Iterator[None]:
    """Within this block, steps are said to `listener` (None: to nobody)."""
    global _listener
    before, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = before


def stderr(text: str) -> None:
    """A step's line on stderr, with the wall-clock time it ended."""
    print(f"correlake: {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)
