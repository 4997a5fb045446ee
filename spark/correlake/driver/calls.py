"""What a driver serves: the functions a call may name."""

from __future__ import annotations

from collections.abc import Callable


def served() -> dict[str, Callable]:
    """What a driver serves, by the name a call travels under: functions whose first
    argument is the SparkSession. Callers name them by reference (`call(pipeline.run, …)`)."""
    from correlake.analysis import explain, query, report_data
    from correlake.run import maintenance, pipeline, stepwise, summary

    return {"run": pipeline.run, "prepare": stepwise.prepare, "compute": stepwise.compute,
            "check": stepwise.check, "publish": stepwise.publish, "findings": summary.findings,
            "maintain": maintenance.maintain, "sql": query.answer, "report": report_data.gather,
            "explain": explain.told, "reasons": report_data.reason_counts}
