"""`correlake maintain`: compact, purge deletion vectors, vacuum, checkpoint every table and drop its expired log."""

from __future__ import annotations

import argparse

from correlake.errors import EXIT_OK
from correlake.interfaces import options
from correlake.lake import preflight


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("maintain",
                            help="compact, purge deletion vectors, vacuum, checkpoint every table, drop its expired log")
    options.add_lake(parser)
    parser.add_argument("--retain-hours", type=options.hours, default=None,
                        help="VACUUM retention (default: Delta's 168 h; a smaller value needs --force)")
    parser.add_argument("--force", action="store_true",
                        help="allow a --retain-hours under 168 h: older versions become unreadable")
    parser.add_argument("--dry-run", action="store_true", help="change nothing; report what VACUUM would delete")
    options.add_wait(parser)
    return parser


def main(args: argparse.Namespace) -> int:
    """Maintain the lake in this process and print the summary; exit codes as `correlake run`'s."""
    from correlake.run import maintenance
    from correlake.runtime.session import get_spark

    preflight.require_folder(args.lake)
    preflight.check_retention(args.retain_hours, args.force, "add --force to vacuum them anyway")
    result = maintenance.maintain(get_spark(), args.lake, args.retain_hours, args.dry_run, args.wait)
    print(maintenance.summary(result))
    return EXIT_OK
