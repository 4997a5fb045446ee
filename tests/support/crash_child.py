"""A `correlake run` that kills its own process (SIGKILL) at a chosen point, or a `correlake
watch` with faults a test arms while it runs.

    python crash_child.py LANDING LAKE POINT
    python crash_child.py watch ARMED WATCH-OPTIONS...

POINT: silver (as the silver stage plans the run's key groups: before anything is written), merge
(after the first gold/silver MERGE has committed, others in flight).

ARMED: a folder; a file the test puts there arms a fault, which removes it when it fires:
`kill` SIGKILLs the watch after a run's first MERGE has committed, `term` sends it SIGTERM
there. While `idle` is there, ticks run nothing (the first to find it writes `idle.seen`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from correlake.interfaces import cli
from correlake.lake import restate
from correlake.run import pipeline
from correlake.run.backends import driver, spark
from correlake.run.watch import Watch
from correlake.runtime.session import get_spark


def die(*_, **__):
    os.kill(os.getpid(), signal.SIGKILL)


def after_first_merge(then: Callable[[], None]) -> None:
    """Call `then` after each MERGE of a run has committed (the first is in flight with others)."""
    real = restate.merge

    def merge_then(*args, **kwargs):
        real(*args, **kwargs)
        then()

    restate.merge = merge_then


def fired(armed: Path, name: str) -> bool:
    """Whether the fault `name` was armed; disarmed now (by one of the threads that find it)."""
    try:
        (armed / name).unlink()
    except FileNotFoundError:
        return False
    return True


def watch(armed: Path, options: list[str]) -> int:
    def merged() -> None:
        if fired(armed, "kill"):
            die()
        if fired(armed, "term"):
            os.kill(os.getpid(), signal.SIGTERM)

    real_step = Watch.run_step

    def run_step(self):
        if not (armed / "idle").exists():
            return real_step(self)
        (armed / "idle.seen").touch()
        return None

    after_first_merge(merged)
    Watch.run_step = run_step
    return cli.main(["watch", *options])


def main(landing: str, lake_dir: str, point: str) -> None:
    if point == "silver":
        driver.Driver.plan_scope = spark.Spark.plan_scope = die  # silver's scope, on either backend
    elif point == "merge":
        after_first_merge(die)
    else:
        raise SystemExit(f"unknown crash point {point}")
    pipeline.run(get_spark(), landing, lake_dir, max_quarantine_ratio=1.0)
    raise SystemExit("the run finished: the crash point was never reached")


if __name__ == "__main__":
    if sys.argv[1] == "watch":
        sys.exit(watch(Path(sys.argv[2]), sys.argv[3:]))
    main(*sys.argv[1:])
