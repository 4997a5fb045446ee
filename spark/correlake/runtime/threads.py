"""A few Spark actions at once, on threads of one session."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from correlake.config import WRITE_THREADS


class _NotStarted(Exception):
    """A task of `run_concurrently` left out: an earlier one failed, or the caller was interrupted."""


def run_concurrently(tasks: list, threads: int = WRITE_THREADS) -> list:
    """Call each of `tasks` (Spark actions) on a few threads; their results, in order.
    After a failure or an interrupt, the tasks not started yet are not started."""
    stop = threading.Event()

    def guarded(task):
        if stop.is_set():
            raise _NotStarted
        try:
            return task()
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(guarded, task) for task in tasks]
        try:
            return [future.result() for future in futures]  # the first failure comes before what it left out
        except BaseException:
            stop.set()
            raise
