"""The lake's run lock: one run (or maintenance) at a time per lake.

`<lake>/_state/lock` names its holder (pid, host, start), written whole or not at all;
it is taken over when its process is gone or after LOCK_STALE_SECONDS, by one taker only
(an `flock` on `_state/lock.guard` serialises takers); a lock file no run wrote is taken
over after LOCK_FOREIGN_STALE_SECONDS. A run removes only its own lock.
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from correlake.config import LOCK_FOREIGN_STALE_SECONDS, LOCK_STALE_SECONDS, lake_state_dir
from correlake.lake.files import flocked, state_dir, write_atomic


class LakeBusy(RuntimeError):
    """Another run holds the lake's lock."""


def lock_path(lake: str) -> Path:
    return lake_state_dir(lake) / "lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    return True


def _stale(holder: dict) -> bool:
    if time.time() - holder.get("started", 0) > LOCK_STALE_SECONDS:
        return True
    return holder.get("host") == socket.gethostname() and not _pid_alive(holder.get("pid", -1))


def _read(path: Path):
    """The lock file's content as JSON; None if it is not JSON. OSError if it cannot be read."""
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def _holder(path: Path) -> dict | None:
    """Who holds the lock at `path`: None if nobody does (no lock, or a stale one)."""
    try:
        holder = _read(path)
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    except OSError:  # a lock it cannot read: held, by someone it cannot name
        return {}
    if not isinstance(holder, dict):  # not written by a run (their locks are whole): stale once old
        return None if age > LOCK_FOREIGN_STALE_SECONDS else {}
    return None if _stale(holder) else holder


def _guarded(lake: str):
    """Every change of the lake's lock file (taking it, taking a stale one over, releasing it)
    one process at a time: two processes never both take over one stale lock."""
    return flocked(state_dir(lake) / "lock.guard")


def _take(lake: str, me: dict) -> dict | None:
    """Take the lake's lock (free or stale): None; else who holds it."""
    path = lock_path(lake)
    with _guarded(lake):
        if (holder := _holder(path)) is not None:
            return holder
        for tmp in path.parent.glob(".*.tmp"):  # left by a process killed while it wrote its lock or journal
            tmp.unlink(missing_ok=True)
        write_atomic(path, json.dumps(me))
    return None


def _busy(path: Path, holder: dict) -> LakeBusy:
    return LakeBusy(f"another correlake run holds {path} (pid {holder.get('pid')} on {holder.get('host')}); "
                    "try again when it has finished")


def check_free(lake: str) -> None:
    """LakeBusy now if a run holds the lake's lock: a quick answer before a slow start
    (`run_lock` still takes the lock)."""
    path = lock_path(lake)
    if (holder := _holder(path)) is not None:
        raise _busy(path, holder)


@contextmanager
def run_lock(lake: str, wait_seconds: float = 0.0):
    """Hold the lake's lock: one run at a time. A lock left by a dead process is taken over."""
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    deadline = time.time() + wait_seconds
    while (holder := _take(lake, me)) is not None:
        if time.time() >= deadline:
            raise _busy(lock_path(lake), holder)
        time.sleep(1.0)
    try:
        yield
    finally:
        with _guarded(lake):  # its own lock only (one taken over from it, as stale, is another's)
            try:
                if _read(lock_path(lake)) == me:
                    lock_path(lake).unlink()
            except FileNotFoundError:
                pass
