"""`correlake run`: ingest a landing's new files and bring silver and gold up to date."""

from __future__ import annotations

import argparse
import sys
import time

from correlake.config import MAX_QUARANTINE_RATIO, absolute, run_path
from correlake.errors import EXIT_GATE, EXIT_OK
from correlake.interfaces import options
from correlake.lake import preflight


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("run", help="ingest new landing files and update silver and gold")
    parser.add_argument("--landing", required=True, help="landing folder (messages/, workflow_events/), or s3a://BUCKET/PREFIX")
    options.add_lake(parser)
    parser.add_argument("--max-quarantine-ratio", type=options.ratio, default=None,
                        help="fail when more than this share of the records read is quarantined "
                             f"(default: $CORRELAKE_MAX_QUARANTINE_RATIO, else {MAX_QUARANTINE_RATIO})")
    parser.add_argument("--full-listing", action="store_true",
                        help="where $CORRELAKE_FULL_LISTING_HOURS declares the landing's paths written in lexical "
                             "order: list the whole landing this once, not only from each stream's last ingested "
                             "path on (finds files written out of order)")
    options.add_run_options(parser)
    return parser


def main(args: argparse.Namespace) -> int:
    return execute(args.landing, args.lake, as_of=args.as_of, max_quarantine_ratio=args.max_quarantine_ratio,
                   wait=args.wait, dry_run=args.dry_run, full_listing=args.full_listing)


def execute(landing: str | None, lake: str, as_of: int | None = None, max_quarantine_ratio: float | None = None,
            wait: float = 0.0, dry_run: bool = False, full_listing: bool = False) -> int:
    """A run over `landing`, or a rebuild (None), on the driver if one serves; its summary printed.
    A run that would find nothing to do says so without starting Spark (`run/unchanged.py`)."""
    from correlake.lake.lock import check_free
    from correlake.run import unchanged
    from correlake.run.summary import summary

    if warning := preflight.check_run(landing, lake, full_listing):
        print(warning, file=sys.stderr)
    started = time.perf_counter()
    # absolute paths: a driver has its own working directory
    landing, lake = (None if landing is None else absolute(landing)), absolute(lake)
    if not wait:
        check_free(lake)  # before Spark starts
    result = None if landing is None else unchanged.check(landing, lake, as_of, full_listing)
    if result is None:
        from correlake.driver import client
        from correlake.quality.gates import GateFailed
        from correlake.run import pipeline
        try:
            result = client.call(pipeline.run, landing, lake, as_of=as_of, max_quarantine_ratio=max_quarantine_ratio,
                                 wait_seconds=wait, rebuild=landing is None, dry_run=dry_run, full_listing=full_listing,
                                 path=run_path())  # the caller's setting, not the driver's
        except GateFailed as exc:
            print(f"correlake: FAILED — {exc}", file=sys.stderr)
            print("Gold was left as it was; nothing of this run was kept.", file=sys.stderr)
            return EXIT_GATE
    result.timings["total"] = round(time.perf_counter() - started, 2)
    print(summary(result))
    if dry_run and not result.nothing_new:
        print("dry run: every gate passed; nothing was published")
    return EXIT_OK
