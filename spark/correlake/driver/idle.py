"""A kept driver's idle time: when it warms up, gives back memory, and stops."""

from __future__ import annotations

import time
from collections.abc import Callable

from correlake.driver import kept
from correlake.driver.warm_up import warm_up
from correlake.errors import first_line
from correlake.runtime.memory import give_back_memory

IDLE_CHECK_SECONDS = 30  # how often a kept driver looks whether it has been idle too long, or its code changed
WARM_UP_AFTER_SECONDS = 60  # a kept driver idle this long gives back memory (and warms up, if asked: `Idle`)
WARM_UP_RECORDS = 20_000  # its warm-up: a first run of this many messages and as many events, then
# CORRELAKE_KEEP_DRIVER_WARM_UP hourly increments (the JIT settles over several), fewer if a call comes


class Idle:
    """A kept driver's idle time: once it has been idle for WARM_UP_AFTER_SECONDS it gives its
    free heap back to the system, and, only if asked (`warm_up_rounds`, from
    CORRELAKE_KEEP_DRIVER_WARM_UP), first warms up once (its first call warmed only that
    call's paths); it stops after `seconds` without a call, or once the code on disk is not
    the code it runs. Unless asked, it spends no CPU between calls. Its time is `clock`'s."""

    def __init__(self, seconds: float, warm_up_rounds: int = 0, clock: Callable[[], float] = time.monotonic):
        self.seconds, self.version, self.rounds, self.clock = seconds, kept.code_version(), warm_up_rounds, clock
        self.warmed = not warm_up_rounds
        self.served()

    def served(self) -> None:
        self.last, self.gave_back = self.clock(), False

    def tick(self) -> float:
        """How long to wait for a call before looking again."""
        return min(IDLE_CHECK_SECONDS, self.seconds / 4)

    def stop_reason(self) -> str | None:
        if self.clock() - self.last >= self.seconds:
            return f"no call for {self.seconds:g} s"
        return "its code changed on disk" if kept.code_version() != self.version else None

    def warm_up_due(self) -> bool:
        return not self.warmed and self.clock() - self.last >= WARM_UP_AFTER_SECONDS

    def warm_up(self, spark, called: Callable[[], bool]) -> None:
        """The warm-up, cut short once `called()` (a caller waits)."""
        self.warmed = True
        try:
            seconds = warm_up(spark, self.rounds, WARM_UP_RECORDS, called)
            print(f"correlake driver: idle, warmed up (runs of {seconds} s)", flush=True)
        except Exception as exc:  # a driver that cannot warm up still serves
            failed("the warm-up", exc)
        self.served()  # its idle time starts again

    def give_back_due(self) -> bool:
        return not self.gave_back and self.clock() - self.last >= WARM_UP_AFTER_SECONDS

    def give_back(self, spark) -> None:
        self.gave_back = True
        try:
            before, after = give_back_memory(spark)
        except Exception as exc:  # it serves on with its heap as it is
            return failed("giving back memory", exc)
        print(f"correlake driver: idle, gave back {(before - after) / 2 ** 30:.1f} GB of heap "
              f"({before / 2 ** 30:.1f} → {after / 2 ** 30:.1f} GB committed)", flush=True)


def failed(what: str, exc: Exception) -> None:
    """Log an idle driver's step that failed; the driver serves on."""
    print(f"correlake driver: {what} failed ({type(exc).__name__}: {first_line(exc)[:300]})", flush=True)
