"""A driver's warm-up: the pipeline's code paths compiled and JIT-warmed on a lake of its own."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from correlake.caches import history_keys
from correlake.run import pipeline
from correlake.samples.workload import BASE_MS, HOUR_MS, generate


def warm_up(spark, rounds: int, records: int = 50_000, until: Callable[[], bool] = lambda: False) -> list[float]:
    """Compile and JIT the pipeline's code paths before the real runs: a first run of
    `records` messages and as many events, then `rounds` increments of 2 % on its lake,
    each in the hour after the one before (as hourly runs go: as_of moves, statuses
    cross, the key columns cached from the run before serve the next), in a temporary
    folder; no further increment once `until()` (a call waits). Returns each run's seconds."""
    root = Path(tempfile.mkdtemp(prefix="correlake-warm-up-"))
    seconds = []
    with history_keys.set_aside():  # what it cached of the lakes it served stays
        try:
            generate(root / "landing0", records, records, "uniform")
            for hour in range(1, rounds + 1):
                generate(root / f"landing{hour}", records // 50, records // 50, "uniform", seed=1 + hour,
                         first_position=10 ** 9 * hour, start_ms=BASE_MS + HOUR_MS * hour)
            for hour in range(rounds + 1):
                if hour and until():
                    break
                start = time.perf_counter()
                pipeline.run(spark, str(root / f"landing{hour}"), str(root / "lake"), max_quarantine_ratio=1.0)
                seconds.append(round(time.perf_counter() - start, 1))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return seconds
