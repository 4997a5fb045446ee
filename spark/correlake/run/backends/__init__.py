"""Where a run's work is executed: two backends behind one interface (docs/design.md, *Backends*).

`choose` names a run's backend once, when it is planned (`StagedRun.prepare`), from what
it brings and CORRELAKE_RUN_PATH; the plan carries the name (`Plan.backend`) to every
stage, and `for_run` gives the stage its backend. The driver backend (`driver.py`: delta-rs
lookups, the pure `semantics/` engine in this process, local frames) raises
`TooLargeForDriver` when the run holds more than it has room for; `StagedRun.scope`
alone catches it, names Spark in the plan and plans the scope again on the Spark
backend (`spark.py`: joins, checkpoints, broadcast hints). Gold is written by the MERGEs
of `sql/` on Spark either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from correlake.config import DRIVER_RUN_MAX_BYTES
from correlake.run.backends.base import DRIVER, SPARK, Backend, Run, Scope, TooLargeForDriver, forced
from correlake.run.backends.driver import Driver
from correlake.run.backends.spark import Spark

if TYPE_CHECKING:
    from correlake.run.store import Plan

__all__ = ["DRIVER", "SPARK", "Backend", "Run", "Scope", "TooLargeForDriver", "choose", "for_run"]


def choose(plan: Plan) -> str:
    """The backend of a run: as CORRELAKE_RUN_PATH forces it, else the driver for a run of at
    most DRIVER_RUN_MAX_BYTES of new JSON that is not a rebuild; Spark for the first run of a
    lake from before the key group table (Spark writes it), even forced."""
    if plan.versions["silver_messages"] >= 0 and plan.versions["key_groups"] < 0 and not plan.result.rebuild:
        return SPARK
    if forced(plan):
        return plan.path
    fits = not plan.result.rebuild and sum(f.json_bytes for f in plan.files) <= DRIVER_RUN_MAX_BYTES
    return DRIVER if fits else SPARK


def for_run(run: Run) -> Backend:
    """The backend the run's plan names."""
    return (Driver if run.plan.backend == DRIVER else Spark)(run)
