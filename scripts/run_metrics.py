"""What a run read and rewrote, in measures a loaded machine does not change (for
scripts/benchmark_age.py): from Spark's event log, its jobs, stages, tasks, the files and
bytes its scans read (Delta's log replays included: they are scans of the log's files);
from the lake, the commits each table's next reader replays past its last checkpoint
and its `_delta_log` files; from the tables' history, what the run's MERGEs rewrote.

Spark writes the event log when the session starts with `EVENT_LOG_CONF` (set in
CORRELAKE_SPARK_CONF before `get_spark`); `EventLog.read` returns what was added since
its last call.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

EVENT_LOG_CONF = ("spark.eventLog.enabled=true,spark.eventLog.dir={folder},spark.eventLog.compress=false,"
                  "spark.eventLog.rolling.enabled=false")  # one file, read by increments
SCAN_METRICS = ("number of files read", "size of files read", "internal.metrics.input.recordsRead",
                "internal.metrics.input.bytesRead")
MERGE_METRICS = ("numTargetFilesRemoved", "numTargetFilesAdded", "numTargetRowsCopied", "numTargetBytesRemoved")


class EventLog:
    """The session's event log (one file in `folder`), read by increments."""

    def __init__(self, folder: Path):
        self.folder, self.offset = folder, 0

    def read(self) -> dict:
        """Jobs, stages, tasks and SCAN_METRICS of the events written since the last call."""
        path = max((p for p in self.folder.iterdir() if p.is_file() and not p.name.startswith(".")),
                   key=lambda p: p.stat().st_mtime)
        with open(path, "rb") as f:
            f.seek(self.offset)
            lines = f.read().split(b"\n")
        complete, self.offset = lines[:-1], self.offset + sum(len(line) + 1 for line in lines[:-1])
        return summarize([json.loads(line) for line in complete])


def _metric_names(plan: dict, names: dict) -> None:
    for metric in plan.get("metrics", ()):
        names[metric["accumulatorId"]] = metric["name"]
    for child in plan.get("children", ()):
        _metric_names(child, names)


def summarize(events: list[dict]) -> dict:
    """Counts of `events` (Spark's listener events as the event log holds them); an
    accumulator's value is its largest seen (stage and driver updates are running totals)."""
    names, values, counts = {}, {}, Counter()
    for event in events:
        kind = event["Event"].rsplit(".", 1)[-1]
        if kind in ("SparkListenerSQLExecutionStart", "SparkListenerSQLAdaptiveExecutionUpdate"):
            _metric_names(event["sparkPlanInfo"], names)
        elif kind == "SparkListenerSQLAdaptiveSQLMetricUpdates":
            names.update((m["accumulatorId"], m["name"]) for m in event["sqlPlanMetrics"])
        elif kind == "SparkListenerJobStart":
            counts["jobs"] += 1
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            counts["stages"] += 1
            counts["tasks"] += info["Number of Tasks"]
            for acc in info.get("Accumulables", ()):
                names.setdefault(acc["ID"], acc.get("Name"))
                values[acc["ID"]] = max(values.get(acc["ID"], 0), _number(acc.get("Value")))
        elif kind == "SparkListenerDriverAccumUpdates":
            for acc_id, value in event["accumUpdates"]:
                values[acc_id] = max(values.get(acc_id, 0), _number(value))
    for acc_id, value in values.items():
        if names.get(acc_id) in SCAN_METRICS:
            counts[names[acc_id]] += value
    return dict(counts)


def _number(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def last_checkpoint(log: Path) -> int:
    """The version of the last checkpoint in the `_delta_log` folder `log`; -1 if none."""
    last = log / "_last_checkpoint"
    return json.loads(last.read_text())["version"] if last.exists() else -1


def log_state(lake: str) -> dict:
    """Over the lake's tables: commits past each one's last checkpoint (what a reader
    replays after it) and `_delta_log` files (what a reader lists)."""
    from correlake.config import TABLES, table_path
    from correlake.lake import tables

    replay = files = 0
    for name in TABLES:
        path = table_path(lake, name)
        if not tables.is_table(path):
            continue
        log = Path(path) / "_delta_log"
        replay += tables.version(path) - last_checkpoint(log)
        files += sum(1 for n in os.listdir(log) if not n.startswith("."))
    return {"commits past checkpoints": replay, "log files": files}


def versions(lake: str) -> dict:
    from correlake.config import TABLES, table_path
    from correlake.lake import tables

    return {name: tables.version(table_path(lake, name)) for name in TABLES}


def merges(lake: str, before: dict) -> dict:
    """MERGE_METRICS summed over the MERGE commits made after the `before` versions, and the
    rows copied by table ("rows copied by table")."""
    from deltalake import DeltaTable

    from correlake.config import TABLES, table_path

    totals, copied = Counter(), Counter()
    for name in TABLES:
        path = table_path(lake, name)
        if not DeltaTable.is_deltatable(path):
            continue
        for commit in DeltaTable(path).history(50):
            if commit.get("version", -1) > before.get(name, -1) and commit.get("operation") == "MERGE":
                metrics = commit.get("operationMetrics") or {}
                totals["merges"] += 1
                for key in MERGE_METRICS:
                    totals[key] += _number(metrics.get(key))
                copied[name] += _number(metrics.get("numTargetRowsCopied"))
    return {**totals, "rows copied by table": dict(copied)}
