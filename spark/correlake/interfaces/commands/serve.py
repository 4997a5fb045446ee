"""`correlake serve`: a long-lived Spark driver that runs take turns on (CORRELAKE_DRIVER)."""

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
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.driver.server import serve

    try:
        serve(Path(args.socket).resolve(), args.warm_up, args.idle)
    except Terminated:  # how a supervisor stops it
        print("correlake driver: stopped by SIGTERM", flush=True)
    return EXIT_OK
