"""The lake's run lock: one run (or maintenance) at a time per lake.

`<lake>/_state/lock` names its holder (pid, host, start), written whole or not at all.
While it holds the lock, a daemon thread of the holder rewrites it every
LOCK_HEARTBEAT_SECONDS (its heartbeat: the file's modification time). The lock is taken
over when its heartbeat has stopped for LOCK_STALE_SECONDS, or at once when its holder
ran on this host and its process is gone; by one taker only (an `flock` on
`_state/lock.guard` serialises every change of the lock file). A lock file no run wrote is
taken over after LOCK_FOREIGN_STALE_SECONDS. A run removes only its own lock.

A holder whose heartbeat finds the lock another's (its own heartbeat stalled that long:
a suspended process, a hung disk) has lost it: it logs an error. `check_held`, called
before a run writes anything (`journal.journalled`), raises LockLost then, or when the
lock file is not the holder's own.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from correlake.config import (LOCK_FOREIGN_STALE_SECONDS, LOCK_HEARTBEAT_SECONDS, LOCK_STALE_SECONDS,
                              lake_state_dir)
from correlake.lake.files import flocked, state_dir, write_atomic

log = logging.getLogger(__name__)


class LakeBusy(RuntimeError):
    """Another run holds the lake's lock."""


class LockLost(LakeBusy):
    """This process held the lake's lock, and another run took it over."""


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


def _stale(holder: dict, age: float) -> bool:
    """A run's lock is stale when its heartbeat stopped (`age`: since it was last written)."""
    if age > LOCK_STALE_SECONDS:
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
    return None if _stale(holder, age) else holder


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


class _Heartbeat(threading.Thread):
    """Rewrites the lock `me` holds every LOCK_HEARTBEAT_SECONDS until `stopped`; sets `lost`
    (and stops) when the lock is no longer `me`'s."""

    def __init__(self, lake: str, me: dict):
        super().__init__(name=f"correlake-lock-heartbeat {lake}", daemon=True)  # dies with its process
        self.lake, self.me = lake, me
        self.stopped, self.lost = threading.Event(), threading.Event()

    def run(self) -> None:
        path = lock_path(self.lake)
        while not self.stopped.wait(LOCK_HEARTBEAT_SECONDS):
            try:
                with _guarded(self.lake):
                    if mine := _read(path) == self.me:
                        write_atomic(path, json.dumps(self.me))
            except FileNotFoundError:
                mine = False
            except OSError as exc:  # a passing failure (a full disk): the next beat tries again
                log.warning("cannot refresh the lake's lock %s: %s", path, exc)
                continue
            if not mine:
                self.lost.set()
                log.error("this run lost the lake's lock %s: its heartbeat stopped for over %s s and another "
                          "run took it over; it will publish nothing", path, LOCK_STALE_SECONDS)
                return


_held: dict[Path, _Heartbeat] = {}  # this process's locks, by lake


def check_held(lake: str) -> None:
    """LockLost if this process holds the lake's lock no more (before a run writes): its
    heartbeat found it another's, or the lock file says so now."""
    heartbeat = _held.get(Path(lake).resolve())
    if heartbeat is None:
        return
    try:
        mine = not heartbeat.lost.is_set() and _read(lock_path(lake)) == heartbeat.me
    except OSError:  # gone, or unreadable: not known to be its own
        mine = False
    if not mine:
        raise LockLost(f"this run lost the lock of {lake} (its heartbeat stopped for over {LOCK_STALE_SECONDS} s "
                       "and another run took it over); nothing was published: start a new run")


@contextmanager
def run_lock(lake: str, wait_seconds: float = 0.0):
    """Hold the lake's lock, its heartbeat beating: one run at a time. A stale lock is taken over."""
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    deadline = time.time() + wait_seconds
    while (holder := _take(lake, me)) is not None:
        if time.time() >= deadline:
            raise _busy(lock_path(lake), holder)
        time.sleep(1.0)
    heartbeat = _held[Path(lake).resolve()] = _Heartbeat(lake, me)
    heartbeat.start()
    try:
        yield
    finally:
        heartbeat.stopped.set()
        heartbeat.join()
        del _held[Path(lake).resolve()]
        with _guarded(lake):  # its own lock only (one taken over from it, as stale, is another's)
            try:
                if _read(lock_path(lake)) == me:
                    lock_path(lake).unlink()
            except FileNotFoundError:
                pass
