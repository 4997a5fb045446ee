"""`correlake serve`: a long-lived Spark driver that runs take turns on (CORRELAKE_DRIVER); `--list`
and `--stop` the kept drivers."""

from __future__ import annotations

import argparse
from pathlib import Path

from correlake.config import default_driver_socket
from correlake.errors import EXIT_OK, Terminated
from correlake.interfaces import options


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("serve", help="a long-lived Spark driver that runs take turns on (CORRELAKE_DRIVER)")
    parser.add_argument("--socket", default=str(default_driver_socket()),
                        help="Unix socket to listen on (default: $CORRELAKE_DRIVER, else <state>/driver.sock)")
    parser.add_argument("--warm-up", type=options.count, default=2, metavar="ROUNDS",
                        help="before serving, a synthetic first run and this many increments (0: none)")
    parser.add_argument("--idle", type=options.seconds, default=0, metavar="SECONDS",
                        help="stop after this long without a call, or once the code changed on disk (0: never)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--list", action="store_true", help="list the kept drivers (those runs start and leave)")
    which.add_argument("--stop", action="store_true", help="stop the kept drivers")
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.driver.server import serve

    if args.list or args.stop:
        return _kept(args.stop)
    try:
        serve(Path(args.socket).resolve(), args.warm_up, args.idle)
    except Terminated:  # how a supervisor stops it
        print("correlake driver: stopped by SIGTERM", flush=True)
    return EXIT_OK


def _kept(stop: bool) -> int:
    """List the kept drivers of this CORRELAKE_HOME (pid, memory, socket), or stop them."""
    from correlake.driver import kept
    from correlake.driver.launch import jvm_pid

    drivers = kept.kept_drivers()
    if not drivers:
        print("no kept driver")
    for driver in drivers:
        if stop:
            outcome = "stopped" if kept.stop(driver) else f"still stopping after {kept.STOP_SECONDS:g} s"
            print(f"kept driver pid {driver.pid}: {outcome}")
        else:
            resident = sum(_resident_mib(pid) for pid in (driver.pid, jvm_pid(driver.pid)) if pid)
            print(f"kept driver pid {driver.pid}, {resident:,.0f} MiB resident with its JVM, log {driver.log}")
    return EXIT_OK


def _resident_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0.0)
