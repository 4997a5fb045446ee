"""The lake's run lock: one run (or maintenance) at a time per lake.

`<lake>/_state/lock` names its holder (pid, host, start), written whole or not at all.
While it holds the lock, a daemon thread of the holder rewrites it every
LOCK_HEARTBEAT_SECONDS (its heartbeat: the file's modification time). The lock is taken
over when its heartbeat has stopped for LOCK_STALE_SECONDS, or at once when its holder
ran on this host and its process is gone; by one taker only: every change of the lock is
a compare-and-swap (`files.state`: under an `flock` in a local folder, a conditional
write in object storage). A lock file no run wrote is taken over after
LOCK_FOREIGN_STALE_SECONDS. A run removes only its own lock.

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
from collections.abc import Callable
from contextlib import contextmanager

from correlake.config import LOCK_FOREIGN_STALE_SECONDS, LOCK_HEARTBEAT_SECONDS, LOCK_STALE_SECONDS, absolute
from correlake.errors import CorrelakeError
from correlake.lake.files import Seen, state

log = logging.getLogger(__name__)
LOCK = "lock"


class LakeBusy(CorrelakeError):
    """Another run holds the lake's lock (a retry may find it free)."""

    retryable = True


class LockLost(LakeBusy):
    """This process held the lake's lock, and another run took it over."""


def lock_path(lake: str, name: str = LOCK) -> str:
    return state(lake).where(name)


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


def _holder(seen: Seen | None) -> dict | None:
    """Who holds the lock as `seen`: None if nobody does (no lock, or a stale one)."""
    if seen is None:
        return None
    try:
        holder = json.loads(seen.text)
    except ValueError:
        holder = None
    if not isinstance(holder, dict):  # not written by a run (their locks are whole): stale once old
        return None if seen.age > LOCK_FOREIGN_STALE_SECONDS else {}
    return None if _stale(holder, seen.age) else holder


def _seen(lake: str, name: str) -> Seen | None:
    """The lock as it is now. A lock that cannot be read is held, by someone it cannot name."""
    try:
        return state(lake).seen(name)
    except OSError:
        return Seen("", "", 0.0)


def _take(lake: str, me: str, name: str = LOCK) -> tuple[str | None, dict | None]:
    """Take the lake's lock `name` (free or stale): (its tag, None); else (None, who holds it)."""
    seen = _seen(lake, name)
    if (holder := _holder(seen)) is not None:
        return None, holder
    files = state(lake)
    tag = files.create(name, me) if seen is None else files.replace(name, me, seen.tag)
    return tag, None if tag is not None else {}  # None: another taker was first


def _busy(lake: str, holder: dict, name: str = LOCK) -> LakeBusy:
    return LakeBusy(f"another correlake {'run' if name == LOCK else 'process'} holds {lock_path(lake, name)} "
                    f"(pid {holder.get('pid')} on {holder.get('host')}); try again when it has finished")


def check_free(lake: str) -> None:
    """LakeBusy now if a run holds the lake's lock: a quick answer before a slow start
    (`run_lock` still takes the lock)."""
    if (holder := _holder(_seen(lake, LOCK))) is not None:
        raise _busy(lake, holder)


Pace = Callable[[threading.Event], bool]  # waits for a heartbeat's next beat: True once its `stopped` is set


def every_heartbeat(stopped: threading.Event) -> bool:
    """The heartbeat's pace: a beat every LOCK_HEARTBEAT_SECONDS."""
    return stopped.wait(LOCK_HEARTBEAT_SECONDS)


class _Heartbeat(threading.Thread):
    """Rewrites the lock `me` holds at each beat of `pace` until `stopped`; sets `lost` (and
    stops) when the lock is no longer `me`'s."""

    def __init__(self, lake: str, name: str, me: str, tag: str, pace: Pace):
        super().__init__(name=f"correlake-lock-heartbeat {lake} {name}", daemon=True)  # dies with its process
        self.lake, self.lock, self.me, self.tag, self.pace = lake, name, me, tag, pace
        self.stopped, self.lost = threading.Event(), threading.Event()

    def run(self) -> None:
        while not self.pace(self.stopped):
            try:
                tag = state(self.lake).replace(self.lock, self.me, self.tag)
            except OSError as exc:  # a passing failure (a full disk, a lost connection): the next beat tries again
                log.warning("cannot refresh the lake's lock %s: %s", lock_path(self.lake, self.lock), exc)
                continue
            if tag is None:
                self.lost.set()
                log.error("this run lost the lake's lock %s: its heartbeat stopped for over %s s and another "
                          "run took it over; it will publish nothing", lock_path(self.lake, self.lock),
                          LOCK_STALE_SECONDS)
                return
            self.tag = tag


_held: dict[str, _Heartbeat] = {}  # this process's locks, by lake


def check_held(lake: str) -> None:
    """LockLost if this process holds the lake's lock no more (before a run writes): its
    heartbeat found it another's, or the lock file says so now."""
    heartbeat = _held.get(absolute(lake))
    if heartbeat is None:
        return
    try:
        mine = not heartbeat.lost.is_set() and state(lake).read(LOCK) == heartbeat.me
    except OSError:  # unreadable: not known to be its own
        mine = False
    if not mine:
        raise LockLost(f"this run lost the lock of {lake} (its heartbeat stopped for over {LOCK_STALE_SECONDS} s "
                       "and another run took it over); nothing was published: start a new run")


@contextmanager
def held(lake: str, name: str, wait_seconds: float = 0.0, pace: Pace = every_heartbeat):
    """Hold the lake's lock `name` (a file of its `_state`), its heartbeat beating at `pace`:
    one holder at a time. A stale lock is taken over. Yields the heartbeat."""
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()})
    deadline = time.time() + wait_seconds
    while (taken := _take(lake, me, name))[0] is None:
        if time.time() >= deadline:
            raise _busy(lake, taken[1], name)
        time.sleep(1.0)
    heartbeat = _Heartbeat(lake, name, me, taken[0], pace)
    heartbeat.start()
    try:
        yield heartbeat
    finally:
        heartbeat.stopped.set()
        heartbeat.join()
        state(lake).remove(name, heartbeat.tag)  # its own lock only (one taken over from it, as stale, is another's)


@contextmanager
def run_lock(lake: str, wait_seconds: float = 0.0, pace: Pace = every_heartbeat):
    """Hold the lake's run lock: one run (or maintenance) at a time."""
    with held(lake, LOCK, wait_seconds, pace) as heartbeat:
        _held[absolute(lake)] = heartbeat
        try:
            yield
        finally:
            del _held[absolute(lake)]
