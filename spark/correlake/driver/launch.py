"""Starting a driver process (`correlake serve`) and waiting until it takes calls."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from correlake.driver.protocol import READY, DriverError, key_path, serving

WATCH_SECONDS = 0.05  # how often a caller looks whether a stopping driver is gone
STOPPING_SECONDS = 5.0  # how long a caller waits for a driver that is stopping to be gone


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


def jvm_pid(pid: int) -> int | None:
    """The pid of the Spark JVM that the driver process `pid` started, if it runs."""
    found = subprocess.run(["pgrep", "-P", str(pid), "java"], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


def serves_calls(address: Path) -> bool:
    """Whether a driver takes calls on `address`. One that is stopping still listens for a
    moment, without its key (`serve` removes the key first; `listen` writes it before it
    listens): it is waited for, up to STOPPING_SECONDS, and then serves none."""
    deadline = time.monotonic() + STOPPING_SECONDS
    while serving(address):
        if key_path(address).exists():
            return True
        if time.monotonic() > deadline:
            raise DriverError(f"the driver at {address} has been stopping for {STOPPING_SECONDS:g} s; try again")
        time.sleep(WATCH_SECONDS)
    return False
