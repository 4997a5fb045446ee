"""A `correlake run` that kills its own process (SIGKILL) at a chosen point.

    python crash_child.py LANDING LAKE POINT

POINT: silver (as the silver stage plans the run's key groups: before anything is written), merge
(after the first gold/silver MERGE has committed, others in flight).
"""

from __future__ import annotations

import os
import signal
import sys

from correlake.run import pipeline, small_scope, staged
from correlake.runtime.session import get_spark


def die(*_, **__):
    os.kill(os.getpid(), signal.SIGKILL)


def main(landing: str, lake_dir: str, point: str) -> None:
    if point == "silver":
        small_scope.plan = die  # either path: the small one's plan is tried first
    elif point == "merge":
        real = staged.restate

        def restate_then_die(*args, **kwargs):
            real(*args, **kwargs)
            die()

        staged.restate = restate_then_die
    else:
        raise SystemExit(f"unknown crash point {point}")
    pipeline.run(get_spark(), landing, lake_dir, max_quarantine_ratio=1.0)
    raise SystemExit("the run finished: the crash point was never reached")


if __name__ == "__main__":
    main(*sys.argv[1:])
