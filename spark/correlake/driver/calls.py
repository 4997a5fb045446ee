"""What a driver serves: the functions a call may name."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

# the name a call travels under -> the module and name of a function whose first argument
# is the SparkSession; callers name them by reference (`call(pipeline.run, …)`)
SERVED = {"run": "correlake.run.pipeline.run", "prepare": "correlake.run.stepwise.prepare",
          "compute": "correlake.run.stepwise.compute", "check": "correlake.run.stepwise.check",
          "publish": "correlake.run.stepwise.publish", "findings": "correlake.run.summary.findings",
          "maintain": "correlake.run.maintenance.maintain", "sql": "correlake.analysis.query.answer",
          "report": "correlake.analysis.report_data.gather", "explain": "correlake.analysis.explain.told",
          "reasons": "correlake.analysis.report_data.reason_counts", "audit": "correlake.analysis.audit.audited"}


def name_of(function: Callable) -> str | None:
    """The name `function` travels under, None if no driver serves it (nothing imported:
    a client needs none of the served modules)."""
    where = f"{function.__module__}.{function.__name__}"
    return next((name for name, path in SERVED.items() if path == where), None)


def served() -> dict[str, Callable]:
    """What a driver serves, by the name a call travels under (each module imported)."""
    found = {}
    for name, path in SERVED.items():
        module, _, attribute = path.rpartition(".")
        found[name] = getattr(import_module(module), attribute)
    return found
