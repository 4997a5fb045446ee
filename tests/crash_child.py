"""A `correlake run` that kills its own process (SIGKILL) at a chosen point, or is
stopped (SIGTERM, as a supervisor stops it) there.

    python crash_child.py LANDING LAKE POINT

POINT: bronze (while bronze is computed), silver (while key groups are computed),
merge (after the first gold/silver MERGE has committed, others in flight);
term: SIGTERM at the point of merge, the run going through `correlake run`'s command line.
"""

from __future__ import annotations

import os
import signal
import sys

from correlake import cli, pipeline, scope, stages
from correlake.session import get_spark


def die(*_, **__):
    os.kill(os.getpid(), signal.SIGKILL)


def stop(*_, **__):
    os.kill(os.getpid(), signal.SIGTERM)


def main(landing: str, lake_dir: str, point: str) -> None:
    if point == "bronze":
        stages._bronze_stats = die
    elif point == "silver":
        scope.grow_groups = die
    elif point in ("merge", "term"):
        real, signal_self = stages.restate, (die if point == "merge" else stop)

        def restate_then_signal(*args, **kwargs):
            real(*args, **kwargs)
            if not signalled:  # once, from the first of the writes in flight
                signalled.append(True)
                signal_self()

        signalled = []

        stages.restate = restate_then_signal
    else:
        raise SystemExit(f"unknown crash point {point}")
    if point == "term":
        sys.exit(cli.main(["run", "--landing", landing, "--lake", lake_dir, "--max-quarantine-ratio", "1"]))
    pipeline.run(get_spark(), landing, lake_dir, max_quarantine_ratio=1.0)
    raise SystemExit("the run finished: the crash point was never reached")


if __name__ == "__main__":
    main(*sys.argv[1:])
