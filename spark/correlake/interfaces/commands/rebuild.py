"""`correlake rebuild`: recompute silver and gold from bronze alone."""

from __future__ import annotations

import argparse

from correlake.interfaces import options
from correlake.interfaces.commands import run


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("rebuild", help="recompute silver and gold from bronze")
    options.add_lake(parser)
    options.add_run_options(parser)
    return parser


def main(args: argparse.Namespace) -> int:
    return run.execute(None, args.lake, as_of=args.as_of, wait=args.wait, dry_run=args.dry_run)
