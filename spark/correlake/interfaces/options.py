"""The command line's option types, and the options its commands share."""

from __future__ import annotations

import argparse
import math
import os
import re

from correlake.config import ConfigError, parse_number


def _number(low: float, high: float, what: str, kind=float):
    """An argparse type: a finite number of `kind` (float or int) in [low, high]."""
    def parse(text: str):
        try:
            return parse_number(text, kind, low, high, what)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


ratio = _number(0.0, 1.0, "between 0 and 1")
hours = _number(0.0, 876_000, "a number of hours from 0 to 876000 (100 years)")
seconds = _number(0.0, math.inf, "a number of seconds, 0 or more")
time_limit = _number(0.001, math.inf, "a number of seconds, 0.001 or more")
count = _number(0, math.inf, "a whole number, 0 or more", int)
positive = _number(1, math.inf, "a whole number, 1 or more", int)


def as_of(text: str) -> int:
    """An argparse type: ISO-8601 with an offset, or epoch millis, as epoch millis."""
    from correlake.contract.parsing import BadRecord, parse_time

    try:
        return parse_time(int(text) if re.fullmatch(r"-?[0-9]+", text) else text, "--as-of")
    except BadRecord as exc:
        raise argparse.ArgumentTypeError(f"{exc} (use ISO-8601 with an offset, or epoch millis)") from None


def out_file(text: str) -> str:
    """An argparse type: a file to write, not an existing folder."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder: name a file")
    return text


def add_lake(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", required=True, help="lake folder (Delta tables), or s3a://BUCKET/PREFIX")


def add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", type=seconds, default=0.0, metavar="SECONDS",
                        help="wait this long for another run holding the lake's lock")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """What `run` and `rebuild` share: --as-of, --wait, --dry-run."""
    parser.add_argument("--as-of", type=as_of, help="evaluate statuses at this time (ISO-8601 with offset)")
    add_wait(parser)
    parser.add_argument("--dry-run", action="store_true", help="run every stage and gate, publish nothing")
