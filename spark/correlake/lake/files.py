"""Files of a lake's state: written whole or not at all, held by one process at a time."""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from correlake.config import lake_state_dir


def write_atomic(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a full disk, a kill mid-write leave the old file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class Held(RuntimeError):
    """Another process holds the `flock` that was asked for without waiting."""


@contextmanager
def flocked(path: Path, wait: bool = True):
    """Hold an exclusive `flock` on `path` (created if need be) while the block runs: one
    process at a time. Released when the block ends, or its process dies. Without `wait`,
    raises Held at once when another process holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise Held(f"{path} is held by another process") from None
        yield
    finally:
        os.close(fd)


def state_dir(lake: str | Path) -> Path:
    """The lake's `_state` folder, created if need be."""
    path = lake_state_dir(lake)
    path.mkdir(parents=True, exist_ok=True)
    return path
