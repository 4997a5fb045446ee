"""Data-quality gates between the stages, with the Great Expectations suites of `expectations/`.

A gate validates the frames of its stage (`rules.py`: `bronze_frames`, `silver_frames`,
`gold_frames`): one Spark query counts the rows that break each condition of its suites
(`metrics.py`), and GX validates that one-row frame of counts (`gx.py`, which also keeps
the results and their Data Docs pages in the lake). A failing gate raises `GateFailed`;
gates run before any write, so the run is discarded.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame

from correlake.errors import EXIT_GATE, CorrelakeError
from correlake.quality import metrics
from correlake.quality.gx import docs_guard, publish_docs, validate
from correlake.quality.rules import FRAME_KEYS


class GateFailed(CorrelakeError):
    """A data-quality gate stopped the run; nothing of the run was kept (bad data stays bad: no retry)."""

    exit_code = EXIT_GATE

    def __init__(self, gate: str, report: str):
        super().__init__(f"data-quality gate '{gate}' failed\n{report}")
        self.gate = gate
        self.report = report

    def __reduce__(self):  # it travels back from a driver (driver/server.py) as itself
        return GateFailed, (self.gate, self.report)


def check(gate: str, frames: dict[str, DataFrame], lake: str) -> None:
    """Measure the conditions of a gate's suites on its frames and validate the metrics;
    raise GateFailed, with examples of the rows that break each failed condition, on any
    failing expectation."""
    import pandas as pd

    lake = str(lake)
    measured = metrics.measure(frames)
    with docs_guard(lake):
        results = {name: validate(name, pd.DataFrame([measured[name]]), lake) for name in frames}
        pages = publish_docs(lake, [identifier for _, _, identifier in results.values()])
    report = []
    for (name, (success, failed, _)), page in zip(results.items(), pages):
        if not success:
            report.append(f"suite '{name}' failed — Data Docs: {page}")
            for metric, value in failed.items():
                c = metrics.conditions(name)[metric]
                rule = f" [rule {c.rule}]" if c.rule else ""
                examples = c.examples(frames[name], FRAME_KEYS[name])
                report.append(f"  - {metric}{rule}: {value} unexpected, {c.describe()}; "
                              f"e.g. {json.dumps(examples)}")
    if report:
        raise GateFailed(gate, "\n".join(report))
