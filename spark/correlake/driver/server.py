"""A long-lived Spark driver: `correlake serve` keeps one SparkSession, and the JVM it
has warmed up, across runs; `client.call` hands a run or a stage to it.

Hourly runs otherwise start a fresh JVM each (the CLI once, Airflow once per task) and
pay its start and its JIT warming up on every run. When `CORRELAKE_DRIVER` names the
socket of a serving driver, `call` sends the work there; otherwise (or when no driver
answers) it runs in this process. Either way the same functions run, on the same lake,
under the same lock and journal: a driver killed mid-run is a crashed run.

The driver serves one call at a time; the others wait. It listens on a Unix socket
(mode 0600), in folders no other user can write, and accepts only clients of its own user
(SO_PEERCRED) that hold its key (`<socket>.key`, mode 0600) and send their call within
DRIVER_HANDSHAKE_SECONDS (a silent client does not stall it). A caller uses only a socket
and key of its own user that no one else can write, served by a process of its user.
A caller that goes away mid-call (killed, timed out) stops its call: the driver cancels
it as Ctrl-C would, and the call's writes roll back.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
import traceback
from multiprocessing import AuthenticationError
from pathlib import Path

from correlake import progress
from correlake.config import keep_driver_warm_up
from correlake.driver.calls import served
from correlake.driver.client import RemoteError
from correlake.driver.idle import Idle
from correlake.driver.protocol import READY, DriverError, Progress, accept, handshake, key_path, listen, send
from correlake.driver.warm_up import warm_up
from correlake.errors import CorrelakeError, first_line, published_before
from correlake.runtime.memory import collections_deferred, release
from correlake.runtime.session import get_spark
from correlake.runtime.signals import interrupt_quietly

WATCH_SECONDS = 0.05  # how often a call's watcher looks whether its caller hung up; a call ends this much later


class CallerGone(BaseException):
    """The caller of the call in progress went away: the call stops (and its writes roll back)."""


class _Call:
    """The call in progress, and a thread that stops it if its caller hangs up (a caller
    sends nothing after its call, so its connection reads only once it is closed)."""

    def __init__(self, conn):
        self.running, self.gone = True, False
        self._watcher = threading.Thread(target=self._watch, args=(conn,), daemon=True)

    def __enter__(self):
        global _current
        _current = self  # before its watcher starts: a caller gone at once is seen
        self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self.running = False
        self._watcher.join()  # before the connection is closed: it reads no other

    def _watch(self, conn) -> None:
        while self.running:
            try:
                if not conn.poll(WATCH_SECONDS):
                    continue
            except (EOFError, OSError):
                pass
            self.gone = True  # to the main thread, whose handler (`_stop_call`) raises CallerGone
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            return


_current: _Call | None = None


def _stop_call(signum, frame) -> None:
    if _current is not None and _current.running and _current.gone:  # not a late signal of an earlier call
        interrupt_quietly(CallerGone)(signum, frame)


def portable(exc: BaseException) -> BaseException:
    """`exc` itself if it is one of correlake's errors (a failed gate, a busy lake...), else
    a RemoteError with its type, message and the driver's traceback."""
    if isinstance(exc, CorrelakeError):
        try:
            return pickle.loads(pickle.dumps(exc))
        except Exception:
            pass
    text = "".join(traceback.format_exception(exc))
    return RemoteError(f"the driver failed: {type(exc).__name__}: {exc}\n--- driver traceback ---\n{text}")


def _alive(spark) -> bool:
    """Whether the session still answers (a JVM that was killed or ran out of memory does not)."""
    try:
        spark.range(1).collect()
        return True
    except Exception:
        return False


def _stopped(name: str) -> tuple[bool, DriverError]:
    print(f"correlake driver: the caller of {name} went away; its call was stopped", flush=True)
    return False, DriverError(f"the caller of {name} went away")


def _serve_one(conn, request: tuple, spark, functions: dict) -> bool:
    """Run one caller's call and send back its result or error; False if Spark did not survive it."""
    name, args, kwargs, *wants = request  # wants: [whether the caller asks for progress lines]
    start = time.perf_counter()
    call = _Call(conn)
    try:
        with call, collections_deferred(), progress.to(
                (lambda text: send(conn, Progress(text))) if wants and wants[0] else None):
            reply = (True, functions[name](spark, *args, **kwargs))
    except CallerGone:  # nobody to reply to
        reply = _stopped(name)
    except KeyboardInterrupt as stopped:  # SIGTERM or Ctrl-C: the driver stops
        if (published := published_before(stopped)) is not None:
            send(conn, (True, published))
        raise
    except Exception as exc:
        # CallerGone may be replaced by the error of a `finally` that meets the cancelled
        # jobs (PySpark's Arrow collect asks the JVM for its result there)
        reply = _stopped(name) if call.gone else (False, portable(exc))
    alive = reply[0] or _alive(spark)
    outcome = "done" if reply[0] else f"failed ({type(reply[1]).__name__}: {first_line(reply[1])[:300]})"
    print(f"correlake driver: {name} {outcome} in {time.perf_counter() - start:.1f} s", flush=True)
    send(conn, reply)
    if alive:  # the call's memory freed once its caller has its reply (the next call waits for it)
        release(spark)
    return alive


def serve(address: Path, warm_up_rounds: int, idle_seconds: float = 0) -> None:
    """Start Spark, warm it up, then serve calls one at a time until SIGTERM or Ctrl-C
    (the caller's handlers: a call in progress is cancelled and rolled back), or, if
    `idle_seconds`, until it has had no call for that long (`Idle`); stop with a
    DriverError if Spark's JVM dies, so that a supervisor starts a new driver."""
    listener, authkey = listen(address)
    on_sigusr1 = signal.signal(signal.SIGUSR1, _stop_call)
    try:
        spark = get_spark()
        if warm_up_rounds:
            print(f"correlake driver: warming up (runs of {warm_up(spark, warm_up_rounds)} s)", flush=True)
        functions = served()
        idle = Idle(idle_seconds, keep_driver_warm_up()) if idle_seconds else None
        print(f"{READY} {address} (pid {os.getpid()})", flush=True)
        while True:
            if idle and not select.select([listener], [], [], idle.tick())[0]:
                if reason := idle.stop_reason():
                    print(f"correlake driver: {reason}; it stops", flush=True)
                    return
                if idle.warm_up_due():
                    idle.warm_up(spark, lambda: bool(select.select([listener], [], [], 0)[0]))
                elif idle.give_back_due():
                    idle.give_back(spark)
                continue
            try:
                conn = accept(listener)
            except OSError:
                continue
            except DriverError as refused:  # another user's process
                print(f"correlake driver: {refused}", flush=True)
                continue
            with conn:
                try:
                    request = handshake(conn, authkey)
                except (OSError, EOFError, AuthenticationError):  # without the key, silent, or gone already
                    continue
                if not _serve_one(conn, request, spark, functions):
                    raise DriverError("Spark's JVM is gone; the driver stops (start it again)")
            if idle:
                idle.served()
    finally:  # the key, then the socket file, then the socket: a driver started meanwhile keeps its own
        signal.signal(signal.SIGUSR1, on_sigusr1)
        key_path(address).unlink(missing_ok=True)
        address.unlink(missing_ok=True)
        listener.close()
