"""`correlake watch`: runs as new landing files come, each followed by a delivery pass when a
sink is given, on one warm Spark driver, until SIGTERM or Ctrl-C (`run/watch.py`)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from correlake.config import MAX_QUARANTINE_RATIO, absolute
from correlake.errors import EXIT_OK, Terminated
from correlake.interfaces import options
from correlake.interfaces.commands.deliver import add_sink_options, opened_sink, pass_settings
from correlake.lake import preflight

DEFAULT_EVERY = 30.0


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("watch", help="run whenever the landing has something new, then deliver; until stopped")
    parser.add_argument("--landing", required=True, help="landing folder (messages/, workflow_events/), or s3a://BUCKET/PREFIX")
    options.add_lake(parser)
    parser.add_argument("--every", type=options.time_limit, default=DEFAULT_EVERY, metavar="SECONDS",
                        help="look for new files this often (default %(default)g)")
    parser.add_argument("--max-quarantine-ratio", type=options.ratio, default=None,
                        help="fail a run when more than this share of its records is quarantined "
                             f"(default: $CORRELAKE_MAX_QUARANTINE_RATIO, else {MAX_QUARANTINE_RATIO})")
    add_sink_options(parser, required=False)
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.delivery import deliver as delivery
    from correlake.run.watch import Watch, watch
    from correlake.runtime.session import get_spark

    if warning := preflight.check_run(args.landing, args.lake):
        print(warning, file=sys.stderr)
    landing, lake = absolute(args.landing), absolute(args.lake)
    say = lambda line: print(line, flush=True)  # noqa: E731
    stop, stopped_by = threading.Event(), []

    def first_stop(signum, frame) -> None:  # the step in progress ends; a second signal interrupts it
        from correlake.runtime.signals import interrupt_quietly

        stop.set()
        stopped_by.append(signal.Signals(signum).name)
        signal.signal(signal.SIGINT, interrupt_quietly(KeyboardInterrupt))
        signal.signal(signal.SIGTERM, interrupt_quietly(Terminated))

    get_spark()  # the warm driver, started now: it sets its own SIGINT handler, which `first_stop` replaces
    previous = {number: signal.signal(number, first_stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        if args.sink is None:
            say(f"correlake watch: {landing} → {lake}, every {args.every:g} s, no sink")
            watch(Watch(landing, lake, args.every, None, args.max_quarantine_ratio, say), stop)
        else:
            settings = pass_settings(args)
            with opened_sink(args) as sink:
                say(f"correlake watch: {landing} → {lake}, every {args.every:g} s, delivering to the {args.sink} sink")
                watch(Watch(landing, lake, args.every, lambda: delivery.deliver(lake, sink, settings),
                            args.max_quarantine_ratio, say), stop)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    say(f"correlake watch: stopped by {stopped_by[0]} after the step in progress")
    return EXIT_OK
