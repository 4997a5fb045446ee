"""A driver kept warm between runs, as build tools keep a daemon: without CORRELAKE_DRIVER,
a call (`correlake run`, an Airflow task, a maintenance) goes to the `correlake serve`
that an earlier call started and left behind, or starts one. A fresh process then pays
neither the JVM's start nor its warming up, which is most of a small increment's time.

The driver gives its free heap back after a minute without a call (and warms up then
only if CORRELAKE_KEEP_DRIVER_WARM_UP asks), and stops itself after CORRELAKE_KEEP_DRIVER
seconds without one (default two hours: hourly runs find it warm), once the code it runs
has changed on disk (`idle.py`), or when `correlake serve --stop` stops it.
CORRELAKE_KEEP_DRIVER=0: no driver is kept, each call runs in its own process.

Its socket, in `<CORRELAKE_HOME>/drivers` (mode 0700), is named by a keyed hash of what the
driver starts Spark with (the environment's variables that configure correlake, Spark, Java,
Hadoop, AWS and Python, the Python that runs it) and of the code, so that a call never
lands on a driver set up otherwise, nor one running older code. One kept driver at a
time: one started for another set-up stops the one before.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from correlake.config import expectations_dir, keep_driver_seconds, sql_dir, state_dir
from correlake.driver.launch import serves_calls, spawn
from correlake.driver.protocol import READY, new_secret, serving

SETUP_PREFIXES = ("CORRELAKE_", "SPARK_", "PYSPARK_", "JAVA_", "HADOOP_", "AWS_", "PYTHON")
# settings each call carries (interfaces/commands/run.py, driver/client.py): not the driver's
PER_CALL = ("CORRELAKE_RUN_PATH", "CORRELAKE_PROGRESS")
STOP_SECONDS = 60.0  # how long `stop` waits for a kept driver to be gone


def code_version() -> str:
    """A digest of the code a driver would run: the package, its SQL and GX suites (each
    file's path, size and modification time)."""
    digest = hashlib.sha256()
    for folder in (Path(__file__).resolve().parents[1], sql_dir(), expectations_dir()):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                info = path.stat()
                digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _folder() -> Path:
    folder = state_dir() / "drivers"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


def _salt(folder: Path) -> bytes:
    """The key of the socket names' hash (the set-up it hashes may hold secrets)."""
    try:
        return new_secret(folder / "salt")
    except FileExistsError:
        return (folder / "salt").read_bytes()


def _socket(folder: Path) -> Path:
    setup = sorted((name, value) for name, value in os.environ.items()
                   if name.startswith(SETUP_PREFIXES) and name not in PER_CALL)
    digest = hashlib.blake2b(repr((sys.executable, setup, code_version())).encode(), key=_salt(folder),
                             digest_size=8)
    return folder / f"{digest.hexdigest()}.sock"


def address() -> Path | None:
    """The socket of this set-up's kept driver (serving or not); None if
    CORRELAKE_KEEP_DRIVER is 0, or if no driver can be kept here (an unwritable home)."""
    if not keep_driver_seconds():
        return None
    try:
        return _socket(_folder())
    except OSError as exc:
        print(f"correlake: no driver can be kept in {state_dir() / 'drivers'} ({exc.strerror}); running in this "
              "process", file=sys.stderr)
        return None


def start(sock: Path) -> None:
    """Start the kept driver at `sock` unless one serves it (once one that is stopping,
    idle, as it was called, has stopped): one caller starts it, the others wait for it
    under a file lock, then use it. Kept drivers of other set-ups are stopped first: one
    warm driver at a time."""
    idle = keep_driver_seconds()
    with open(sock.parent / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if serves_calls(sock):
            return
        for other in kept_drivers():
            stop(other)
        started = time.perf_counter()
        process = spawn(sock, sock.with_suffix(".log"), warm_up_rounds=0, idle_seconds=idle, detached=True)
        print(f"correlake: started a driver (pid {process.pid}, {time.perf_counter() - started:.0f} s) that "
              f"keeps Spark warm for the next runs; it stops after {idle / 3600:g} h without one, or with "
              f"`correlake serve --stop` (CORRELAKE_KEEP_DRIVER=0: each run in its own process; its log: "
              f"{sock.with_suffix('.log')})", file=sys.stderr)


@dataclass(frozen=True)
class KeptDriver:
    socket: Path
    pid: int

    @property
    def log(self) -> Path:
        return self.socket.with_suffix(".log")


def kept_drivers() -> list[KeptDriver]:
    """The kept drivers of this CORRELAKE_HOME that serve, whatever their set-up: each one's
    process as its log names it, if that process is the `correlake serve` of its socket."""
    folder = state_dir() / "drivers"
    found = []
    for sock in sorted(folder.glob("*.sock")) if folder.is_dir() else []:
        ready = re.findall(rf"^{re.escape(READY)} (.*) \(pid (\d+)\)$", _text(sock.with_suffix(".log")), re.M)
        if ready and ready[-1][0] == str(sock) and _serves(int(ready[-1][1]), sock) and serving(sock):
            found.append(KeptDriver(sock, int(ready[-1][1])))
    return found


def stop(driver: KeptDriver, timeout: float = STOP_SECONDS) -> bool:
    """SIGTERM to a kept driver (a call in progress is rolled back); whether it stopped within `timeout`."""
    try:
        os.kill(driver.pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while serving(driver.socket) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not serving(driver.socket)


def _serves(pid: int, sock: Path) -> bool:
    """Whether process `pid` is a `correlake serve` on `sock` (not another that took its pid)."""
    arguments = _text(Path(f"/proc/{pid}/cmdline")).split("\0")
    return "serve" in arguments and str(sock) in arguments


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
