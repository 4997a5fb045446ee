"""A long-lived Spark driver: `correlake serve` keeps one SparkSession, and the JVM it
has warmed up, across runs; `call` hands a run or a stage to it.

Hourly runs otherwise start a fresh JVM each (the CLI once, Airflow once per task) and
pay its start and its JIT warming up on every run. When `CORRELAKE_DRIVER` names the
socket of a serving driver, `call` sends the work there; otherwise (or when no driver
answers) it runs in this process. Either way the same functions run, on the same lake,
under the same lock and journal: a driver killed mid-run is a crashed run.

The driver serves one call at a time; the others wait. It listens on a Unix socket
(mode 0600) and accepts only clients that hold its key (`<socket>.key`, mode 0600) and
send their call within DRIVER_HANDSHAKE_SECONDS (a silent client does not stall it). A
caller uses only a socket and key of its own user that no one else can write.
A caller that goes away mid-call (killed, timed out) stops its call: the driver cancels
it as Ctrl-C would, and the call's writes roll back.
"""

from __future__ import annotations

import os
import pickle
import secrets
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from correlake.config import DRIVER_HANDSHAKE_SECONDS, driver_socket
from correlake.errors import first_line, published_before

BACKLOG = 64  # callers waiting for the driver
IDLE_CHECK_SECONDS = 30  # how often a kept driver looks whether it has been idle too long, or its code changed
WARM_UP_AFTER_SECONDS = 60  # a kept driver idle this long warms up, once, then gives back memory (`_Idle`)
WARM_UP_RECORDS = 20_000  # its warm-up: a first run of this many messages and as many events,
WARM_UP_ROUNDS = 6  # then as many hourly increments (the JIT settles over several), fewer if a call comes
WATCH_SECONDS = 0.05  # how often a call's watcher looks whether its caller hung up; a call ends this much later
T = TypeVar("T")
READY = "correlake driver: serving"  # the line `serve` prints once it takes calls
STOPPING_SECONDS = 5.0  # how long a caller waits for a driver that is stopping to be gone


class DriverError(RuntimeError):
    """The driver failed, or is gone; for errors other than correlake's own, with the driver's traceback."""


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
    from correlake.session import interrupt_quietly

    if _current is not None and _current.running and _current.gone:  # not a late signal of an earlier call
        interrupt_quietly(CallerGone)(signum, frame)


def served() -> dict[str, Callable]:
    """What a driver serves, by the name a call travels under: functions whose first
    argument is the SparkSession. Callers name them by reference (`call(pipeline.run, …)`)."""
    from correlake.lake import maintenance
    from correlake.run import pipeline, stepwise, summary

    return {"run": pipeline.run, "prepare": stepwise.prepare, "compute": stepwise.compute,
            "check": stepwise.check, "publish": stepwise.publish, "findings": summary.findings,
            "maintain": maintenance.maintain}


def _key_path(address: Path) -> Path:
    return address.with_name(address.name + ".key")


def _check_owned(path: Path) -> None:
    """DriverError unless `path` is this user's and not group- or world-writable (another
    user could stand in for the driver, or read what it is sent)."""
    info = path.stat()
    if info.st_uid != os.getuid():
        raise DriverError(f"refusing to call the driver: {path} belongs to uid {info.st_uid}, not to this user "
                          f"(uid {os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise DriverError(f"refusing to call the driver: {path} is group- or world-writable "
                          f"(mode {stat.S_IMODE(info.st_mode):o}); it must be 600")


def call(function: Callable[..., T], *args, **kwargs) -> T:
    """`function`(spark, *args, **kwargs) (one of `served()`) on the driver at
    `CORRELAKE_DRIVER`, else on the kept driver (`kept_driver.py`), else here."""
    name = next((n for n, f in served().items() if f is function), None)
    if name is None:
        raise ValueError(f"a driver does not serve {function.__module__}.{function.__qualname__}")
    address = driver_socket()
    conn = _connect_kept() if address is None else _connect_named(address)
    if conn is None:
        from correlake.session import get_spark

        return function(get_spark(), *args, **kwargs)
    with conn:
        try:
            conn.send((name, args, kwargs))
            ok, value = conn.recv()
        except (EOFError, OSError):
            raise DriverError(f"the driver stopped during {name}; the lake's journal rolls back what it left "
                              "unfinished at the next run") from None
    if ok:
        return value
    raise value


def _connect(address: Path):
    _check_owned(address)
    _check_owned(_key_path(address))
    return Client(str(address), family="AF_UNIX", authkey=_key_path(address).read_bytes())


def _connect_named(address: Path):
    """A connection to the driver at CORRELAKE_DRIVER; None (run here) if none serves it."""
    try:
        return _connect(address)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        print(f"correlake: no driver serves {address} ({exc.strerror}); running in this process", file=sys.stderr)
        return None
    except (OSError, EOFError, AuthenticationError) as exc:  # a key of another driver, one just stopping
        raise DriverError(f"cannot call the driver at {address} ({type(exc).__name__}: {exc}); "
                          "try again, or unset CORRELAKE_DRIVER to run in this process") from None


def _connect_kept():
    """A connection to the kept driver, started if none serves; None if none is kept."""
    from correlake.run import kept_driver

    if (address := kept_driver.address()) is None:
        return None
    try:
        return _connect(address)
    except (OSError, EOFError, AuthenticationError):  # none serves yet, or it stopped, idle, as it was called
        kept_driver.start(address)
    try:
        return _connect(address)
    except (OSError, EOFError, AuthenticationError) as exc:
        raise DriverError(f"cannot call the kept driver at {address} ({type(exc).__name__}: {exc}); "
                          "CORRELAKE_KEEP_DRIVER=0 runs in this process") from None


def spawn(address: Path, log: Path, warm_up_rounds: int | None = None, env: dict | None = None,
          timeout: float = 600.0, idle_seconds: float = 0, detached: bool = False) -> subprocess.Popen:
    """Start `correlake serve` on `address` as a child process writing to `log` (default
    warm-up unless `warm_up_rounds`; stopping after `idle_seconds` without a call unless 0;
    in a session of its own if `detached`, to outlive its caller); return it once it serves."""
    command = [str(Path(sys.executable).with_name("correlake")), "serve", "--socket", str(address),
               "--idle", f"{idle_seconds:g}"]
    if warm_up_rounds is not None:
        command += ["--warm-up", str(warm_up_rounds)]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=detached, cwd=address.parent if detached else None)
    deadline = time.monotonic() + timeout
    while READY not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise DriverError(f"the driver did not start serving:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return process


def jvm_pid(process: subprocess.Popen) -> int | None:
    """The pid of the Spark JVM that a spawned driver started, if it runs."""
    found = subprocess.run(["pgrep", "-P", str(process.pid), "java"], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


class RemoteError(DriverError):
    """An error other than correlake's own, raised on the driver: its type, message and traceback."""


def _portable(exc: BaseException) -> BaseException:
    """`exc` itself if it is one of correlake's errors (a failed gate, a busy lake...), else
    a RemoteError with its type, message and the driver's traceback."""
    if type(exc).__module__.startswith("correlake."):
        try:
            return pickle.loads(pickle.dumps(exc))
        except Exception:
            pass
    text = "".join(traceback.format_exception(exc))
    return RemoteError(f"the driver failed: {type(exc).__name__}: {exc}\n--- driver traceback ---\n{text}")


def serving(address: Path) -> bool:
    """Whether a driver listens on `address` (a connection it drops at once, as a caller without the key)."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(address))
        except OSError:
            return False
    return True


def serves_calls(address: Path) -> bool:
    """Whether a driver takes calls on `address`. One that is stopping still listens for a
    moment, without its key (`serve` removes the key first; `_listen` writes it before it
    listens): it is waited for, up to STOPPING_SECONDS, and then serves none."""
    deadline = time.monotonic() + STOPPING_SECONDS
    while serving(address):
        if _key_path(address).exists():
            return True
        if time.monotonic() > deadline:
            raise DriverError(f"the driver at {address} has been stopping for {STOPPING_SECONDS:g} s; try again")
        time.sleep(WATCH_SECONDS)
    return False


def new_secret(path: Path) -> bytes:
    """32 random bytes, written to a new file of mode 0600 (FileExistsError if there is one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secret := secrets.token_bytes(32))
    return secret


def _listen(address: Path) -> tuple[socket.socket, bytes]:
    """Listen on `address` with a fresh key (the listening socket and the key: callers prove
    it in `_handshake`); refuse if another driver already listens there."""
    address.parent.mkdir(parents=True, exist_ok=True)
    if serving(address):
        raise DriverError(f"a driver already serves {address}")
    address.unlink(missing_ok=True)  # left by a driver that was killed
    _key_path(address).unlink(missing_ok=True)
    authkey = new_secret(_key_path(address))
    listener = socket.socket(socket.AF_UNIX)
    old_umask = os.umask(0o177)  # the socket file is created 0600
    try:
        listener.bind(str(address))
    finally:
        os.umask(old_umask)
    listener.listen(BACKLOG)
    return listener, authkey


def _accept(listener: socket.socket) -> Connection:
    sock, _ = listener.accept()
    sock.setblocking(True)
    return Connection(sock.detach())


def _handshake(conn, authkey: bytes) -> tuple:
    """The caller's call, once it proved it holds the key; each read of it waits
    DRIVER_HANDSHAKE_SECONDS at most (OSError), so that a silent caller is dropped."""
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:  # the same socket: its options are the connection's
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", DRIVER_HANDSHAKE_SECONDS, 0))
        deliver_challenge(conn, authkey)
        answer_challenge(conn, authkey)
        request = conn.recv()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    return request


def warm_up(spark, rounds: int, records: int = 50_000, until: Callable[[], bool] = lambda: False) -> list[float]:
    """Compile and JIT the pipeline's code paths before the real runs: a first run of
    `records` messages and as many events, then `rounds` increments of 2 % on its lake,
    each in the hour after the one before (as hourly runs go: as_of moves, statuses
    cross, the key columns kept from the run before serve the next), in a temporary
    folder; no further increment once `until()` (a call waits). Returns each run's seconds."""
    from correlake.run import history_keys, pipeline
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate

    root = Path(tempfile.mkdtemp(prefix="correlake-warm-up-"))
    seconds = []
    with history_keys.set_aside():  # the lakes it served keep theirs
        try:
            generate(root / "landing0", records, records, "uniform")
            for hour in range(1, rounds + 1):
                generate(root / f"landing{hour}", records // 50, records // 50, "uniform", seed=1 + hour,
                         first_position=10 ** 9 * hour, start_ms=BASE_MS + HOUR_MS * hour)
            for hour in range(rounds + 1):
                if hour and until():
                    break
                start = time.perf_counter()
                pipeline.run(spark, str(root / f"landing{hour}"), str(root / "lake"), max_quarantine_ratio=1.0)
                seconds.append(round(time.perf_counter() - start, 1))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return seconds


def _alive(spark) -> bool:
    """Whether the session still answers (a JVM that was killed or ran out of memory does not)."""
    try:
        spark.range(1).collect()
        return True
    except Exception:
        return False


def _serve_one(conn, request: tuple, spark, functions: dict) -> bool:
    """Run one caller's call and send back its result or error; False if Spark did not survive it."""
    from correlake.session import collections_deferred, release

    name, args, kwargs = request
    start = time.perf_counter()
    try:
        with _Call(conn), collections_deferred():
            reply = (True, functions[name](spark, *args, **kwargs))
    except CallerGone:  # nobody to reply to
        print(f"correlake driver: the caller of {name} went away; its call was stopped", flush=True)
        reply = (False, DriverError(f"the caller of {name} went away"))
    except KeyboardInterrupt as stopped:  # SIGTERM or Ctrl-C: the driver stops
        if (published := published_before(stopped)) is not None:
            _send(conn, (True, published))
        raise
    except Exception as exc:
        reply = (False, _portable(exc))
    alive = reply[0] or _alive(spark)
    outcome = "done" if reply[0] else f"failed ({type(reply[1]).__name__}: {first_line(reply[1])[:300]})"
    print(f"correlake driver: {name} {outcome} in {time.perf_counter() - start:.1f} s", flush=True)
    _send(conn, reply)
    if alive:  # the call's memory freed once its caller has its reply (the next call waits for it)
        spark.catalog.clearCache()
        release(spark)
    return alive


def _send(conn, reply: tuple) -> None:
    try:
        conn.send(reply)
    except OSError:
        pass  # the caller left; the work is done (or rolled back) all the same


class _Idle:
    """A kept driver's idle time: it warms up once it has been idle for WARM_UP_AFTER_SECONDS
    (its first call warmed only that call's paths; a driver kept for less never does), gives
    its free heap back to the system each time it has been idle that long after that, and
    stops after `seconds` without a call, or once the code on disk is not the code it runs.
    Its time is `clock`'s."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        from correlake.run.kept_driver import code_version

        self.seconds, self.version, self.warmed, self.clock = seconds, code_version(), False, clock
        self.served()

    def served(self) -> None:
        self.last, self.gave_back = self.clock(), False

    def tick(self) -> float:
        """How long to wait for a call before looking again."""
        return min(IDLE_CHECK_SECONDS, self.seconds / 4)

    def stop_reason(self) -> str | None:
        from correlake.run.kept_driver import code_version

        if self.clock() - self.last >= self.seconds:
            return f"no call for {self.seconds:g} s"
        return "its code changed on disk" if code_version() != self.version else None

    def warm_up_due(self) -> bool:
        return not self.warmed and self.clock() - self.last >= WARM_UP_AFTER_SECONDS

    def warm_up(self, spark, called: Callable[[], bool]) -> None:
        """The warm-up, cut short once `called()` (a caller waits)."""
        self.warmed = True
        try:
            seconds = warm_up(spark, WARM_UP_ROUNDS, WARM_UP_RECORDS, called)
            print(f"correlake driver: idle, warmed up (runs of {seconds} s)", flush=True)
        except Exception as exc:  # a driver that cannot warm up still serves
            _failed("the warm-up", exc)
        self.served()  # its idle time starts again

    def give_back_due(self) -> bool:
        return not self.gave_back and self.clock() - self.last >= WARM_UP_AFTER_SECONDS

    def give_back(self, spark) -> None:
        from correlake.session import give_back_memory

        self.gave_back = True
        try:
            before, after = give_back_memory(spark)
        except Exception as exc:  # it serves on with its heap as it is
            return _failed("giving back memory", exc)
        print(f"correlake driver: idle, gave back {(before - after) / 2 ** 30:.1f} GB of heap "
              f"({before / 2 ** 30:.1f} → {after / 2 ** 30:.1f} GB committed)", flush=True)


def _failed(what: str, exc: Exception) -> None:
    """Log an idle driver's step that failed; the driver serves on."""
    print(f"correlake driver: {what} failed ({type(exc).__name__}: {first_line(exc)[:300]})", flush=True)


def serve(address: Path, warm_up_rounds: int, idle_seconds: float = 0) -> None:
    """Start Spark, warm it up, then serve calls one at a time until SIGTERM or Ctrl-C
    (the caller's handlers: a call in progress is cancelled and rolled back), or, if
    `idle_seconds`, until it has had no call for that long (`_Idle`); stop with a
    DriverError if Spark's JVM dies, so that a supervisor starts a new driver."""
    from correlake.session import get_spark

    listener, authkey = _listen(address)
    on_sigusr1 = signal.signal(signal.SIGUSR1, _stop_call)
    try:
        spark = get_spark()
        if warm_up_rounds:
            print(f"correlake driver: warming up (runs of {warm_up(spark, warm_up_rounds)} s)", flush=True)
        functions = served()
        idle = _Idle(idle_seconds) if idle_seconds else None
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
                conn = _accept(listener)
            except OSError:
                continue
            with conn:
                try:
                    request = _handshake(conn, authkey)
                except (OSError, EOFError, AuthenticationError):  # without the key, silent, or gone already
                    continue
                if not _serve_one(conn, request, spark, functions):
                    raise DriverError("Spark's JVM is gone; the driver stops (start it again)")
            if idle:
                idle.served()
    finally:  # the key, then the socket file, then the socket: a driver started meanwhile keeps its own
        signal.signal(signal.SIGUSR1, on_sigusr1)
        _key_path(address).unlink(missing_ok=True)
        address.unlink(missing_ok=True)
        listener.close()
