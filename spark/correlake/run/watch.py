"""`correlake watch` (contract: *Continuous runs*): a run whenever the landing holds
something new, then a delivery pass, every few seconds, on one warm Spark driver (this
process's, started at the first run), until told to stop.

A tick costs no JVM work unless there is something new (`run/unchanged.py` answers from
the lake's bookkeeping), and a run holds the lake's lock only while it runs, so Airflow's
runs and analysts' reads go on beside it (a tick that meets the lake busy tries again at
the next). A run whose gate fails published nothing; the same files are not run again
until a new file comes, and then they are run with it: a failed gate is never skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from correlake.delivery.deliver import DeliveryBusy, PassResult, tallied
from correlake.errors import first_line
from correlake.lake.discovery import find
from correlake.lake.lock import LakeBusy
from correlake.quality.gates import GateFailed
from correlake.run import pipeline, unchanged
from correlake.run.result import RunResult
from correlake.runtime.session import get_spark

STOP_POLL_SECONDS = 0.2  # how soon a stop ends the wait between ticks


@dataclass
class Watch:
    """One watch's settings and what it carries from tick to tick."""

    landing: str
    lake: str
    every: float
    deliver: Callable[[], PassResult] | None = None  # a pass to the sink, if one is given
    max_quarantine_ratio: float | None = None
    say: Callable[[str], None] = print
    failed_on: frozenset = frozenset()  # the new files a gate failed on: not run again alone
    last_note: str | None = None

    def tick(self, stop: threading.Event) -> None:
        """A run if something is new, then a pass, unless `stop` came during the run: each
        is a step, and a stop ends the watch after the step in progress."""
        self.run_step()
        if self.deliver is not None and not stop.is_set():
            self.pass_step()

    def run_step(self) -> RunResult | None:
        if unchanged.check(self.landing, self.lake) is not None:
            return None
        pending = frozenset(f.identity for f in find(self.landing, self.lake).files)
        if pending and pending <= self.failed_on:
            return None  # the files a gate failed on, and nothing new with them
        started = time.perf_counter()
        try:
            result = pipeline.run(get_spark(), self.landing, self.lake, max_quarantine_ratio=self.max_quarantine_ratio)
        except LakeBusy as exc:
            self._line(f"run: {first_line(exc)}; next try in {self.every:g} s")
            return None
        except GateFailed as exc:
            self.failed_on = pending
            self._line(f"run: FAILED, nothing published; it runs again with the next new file — {exc}")
            return None
        self.failed_on = frozenset()
        rolled_back = f"rolled back the unfinished run {result.rolled_back} first, " if result.rolled_back else ""
        self._line(f"run {result.run_id or '(statuses)'}: {rolled_back}{result.records_read} records "
                   f"({result.quarantined_total} quarantined), {result.correlations} correlations, "
                   f"{result.outbox_events} events to deliver, {time.perf_counter() - started:.1f} s"
                   + (f" (path {result.path})" if result.path else ""))
        return result

    def pass_step(self) -> PassResult | None:
        try:
            result = self.deliver()
        except DeliveryBusy as exc:
            self._line(f"pass: {first_line(exc)}")
            return None
        if sum(result.tally.values()) or result.note != self.last_note:  # an idle pass prints nothing
            self._line(f"pass: {tallied(result).removeprefix('this pass: ')}, {result.seconds:.1f} s"
                       + (f"; last error: {result.last_error}" if result.last_error else "")
                       + (f"; {result.waiting} events wait" if result.waiting else "")
                       + (f" — {result.note}" if result.note else ""))
        self.last_note = result.note
        return result

    def _line(self, text: str) -> None:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        self.say(f"{now} {text}")


def watch(settings: Watch, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
    """Tick every `settings.every` seconds (a tick that took longer is followed at once)
    until `stop` is set; a stop during a tick ends the loop after the step in progress."""
    while not stop.is_set():
        started = clock()
        settings.tick(stop)
        while not stop.is_set() and clock() - started < settings.every:
            stop.wait(min(STOP_POLL_SECONDS, settings.every - (clock() - started)))
