"""What a run did: `RunResult`, returned by every run and recorded in `_meta/runs`."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field

from correlake.config import BRONZE_TABLES, ENGINE_STREAM
from correlake.contract.reasons import reason_kind
from correlake.text import escape


@dataclass
class RunResult:
    run_id: str | None
    files: int = 0
    records_read: int = 0
    quarantined: dict = field(default_factory=dict)  # reason (its kind: bronze.reason_kind) -> lines
    first_quarantined: dict = field(default_factory=dict)  # reason -> "file:line" of its first line
    replays: int = 0
    new_messages: int = 0
    new_workflow_events: int = 0
    engine_records: int = 0  # new exporter records (contract revision 4), ignored ones included
    ignored_records: int = 0  # of them, those of kinds correlake does not read (engine_records.USED_KINDS)
    accepted: dict = field(default_factory=dict)  # stream -> its lines that went to bronze (replays included)
    touched_groups: int = 0
    path: str | None = None  # where rule 7 and the engine ran: `driver` (the driver process) or `spark` (config.RUN_PATHS)
    correlations: int = 0
    outbox_events: int = 0  # the events the run adds to delivery/outbox
    outbox_backfilled: bool = False  # the lake had no outbox: its events are every gold correlation's
    as_of: int | None = None
    max_event_time: int | None = None
    deployments: int = 0
    mapped: int | None = None  # exporter records the run mapped (run/engine_silver.py; None: a canonical run)
    unmapped: int = 0  # exporter records not mapped (yet): the rows of unmapped_engine_records after the run
    as_of_given: bool = False  # as_of set by the caller (--as-of), not by the last event time
    engine_correlations: int = 0  # the rows the run gives gold/engine_correlations (contract revision 4)
    engine_duplicates: int = 0  # its CORRELATED records that are not a row (a later record of a pair)
    lines: dict = field(default_factory=dict)
    not_read: dict = field(default_factory=dict)  # path -> why: files refused when read, left in the landing
    timings: dict = field(default_factory=dict)
    nothing_new: bool = False  # no new landing file: at most a status refresh (as_of_before set)
    as_of_before: int | None = None  # nothing new: the as_of gold's statuses were at, when as_of moved
    statuses_changed: int = 0  # nothing new, as_of moved: the gold/messages rows whose status crossed
    rebuild: bool = False
    rolled_back: str | None = None  # the unfinished run this one rolled back first
    max_quarantine_ratio: float | None = None  # the bronze gate's limit this run was held to
    migrated: bool = False  # the lake was brought to contract revision 2 first (lake/as_of.migrate)
    outbox_migrated: int | None = None  # the outbox was brought to revision 3 first: its events (run/outbox.migrate)
    started_at: int = field(default_factory=lambda: int(time.time() * 1000))  # epoch millis
    ingested_at: int | None = None  # epoch millis: the `_ingested_at` of the run's bronze rows and files

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())

    def top_quarantine_reasons(self, n: int) -> list[tuple[str, int, str]]:
        """The n most frequent reasons, to show: (reason, lines, where its first line is), control
        characters escaped (a reason may quote a value, the file's name is the producer's)."""
        top = sorted(self.quarantined.items(), key=lambda kv: -kv[1])[:n]
        return [(escape(reason), count, escape(str(self.first_quarantined.get(reason)))) for reason, count in top]

    def count_lines(self, counts, last_event_time: int | None) -> None:
        """Add the run's line counts (`bronze.line_counts`: rows of stream, reason, _is_replay,
        type, _ignored, _source_file, n, t, first_line), its max event time and hence its as_of; and
        the files it did not read (`first_line` None)."""
        first: dict[str, tuple[str, int]] = {}
        for r in counts:
            if r["first_line"] is None:  # a file not read (bronze.read_file): no line of it
                self.not_read[r["_source_file"]] = r["reason"]
                self.files -= 1
                continue
            self.records_read += r["n"]
            self.lines[r["_source_file"]] = self.lines.get(r["_source_file"], 0) + r["n"]
            if r["reason"] is not None:
                kind = reason_kind(r["reason"])
                self.quarantined[kind] = self.quarantined.get(kind, 0) + r["n"]
                here = (r["_source_file"], r["first_line"])
                first[kind] = min(first.get(kind, here), here)
                continue
            self.accepted[r["stream"]] = self.accepted.get(r["stream"], 0) + r["n"]
            if r["_is_replay"]:
                self.replays += r["n"]
            elif r["stream"] == "messages":
                self.new_messages += r["n"]
            elif r["stream"] == ENGINE_STREAM:
                self.engine_records += r["n"]
                self.ignored_records += r["n"] if r["_ignored"] else 0
            else:
                self.new_workflow_events += r["n"]
                self.deployments += r["n"] if r["type"] == "PROCESS_DEPLOYED" else 0
        self.first_quarantined = {reason: f"{path}:{line}" if line else path  # 0: the whole file
                                  for reason, (path, line) in first.items()}
        times = [r["t"] for r in counts if r["reason"] is None and not r["_is_replay"] and r["t"] is not None
                 and r["stream"] != ENGINE_STREAM]
        if last_event_time is not None:
            times.append(last_event_time)
        self.max_event_time = max(times, default=None)
        self.as_of_given = self.as_of is not None
        self.as_of = self.as_of if self.as_of_given else self.max_event_time

    def count_mapped_time(self, t: int | None) -> None:
        """Add the last event time of the exporter records the run mapped: as_of counts mapped records only."""
        self.max_event_time = max((x for x in (self.max_event_time, t) if x is not None), default=None)
        self.as_of = self.as_of if self.as_of_given else self.max_event_time

    def appended_rows(self) -> dict[str, int]:
        """The rows the run appends to each appended table but `ingested_files` (0: no write)."""
        return {"quarantine": self.quarantined_total, "silver_workflow_events": self.new_workflow_events,
                **{name: self.accepted.get(stream, 0) for stream, name in BRONZE_TABLES.items()}}

    def quarantine_excess(self, limit: float) -> str | None:
        """Why the run quarantined too much (more than `limit` of the records read), or None."""
        ratio = self.quarantined_total / max(self.records_read, 1)
        if ratio <= limit:
            return None
        reasons = "\n".join(f"  {count:>8}  {reason}  (first: {where})"
                            for reason, count, where in self.top_quarantine_reasons(20))
        enough = math.ceil(ratio * 10_000) / 10_000
        return (f"quarantined {self.quarantined_total} of {self.records_read} records ({ratio:.2%}) > "
                f"max_quarantine_ratio {limit:.2%}; nothing was committed\n{reasons}\n"
                f"To keep these lines in quarantine and go on, run once with a max_quarantine_ratio of {enough} "
                "(--max-quarantine-ratio, or the DAG's param); the files stay unread until then")

    def runs_row(self) -> tuple:
        """The run's row of `_meta/runs` (times in epoch millis)."""
        summary = json.dumps({"quarantined": self.quarantined, "not_read": self.not_read, "timings": self.timings,
                              "touched_groups": self.touched_groups, "path": self.path, "replays": self.replays,
                              "rebuild": self.rebuild, "as_of_before": self.as_of_before,
                              "outbox_events": self.outbox_events, "max_quarantine_ratio": self.max_quarantine_ratio,
                              **self._engine_counts()})
        return (self.run_id, self.started_at, int(time.time() * 1000), self.files, self.records_read,
                self.quarantined_total, self.max_event_time, self.as_of, summary)

    def _engine_counts(self) -> dict:
        """The exporter records' counts of a run of a lake of them (contract revision 4), else none."""
        if self.mapped is None and not self.engine_records:
            return {}
        return {"exporter_records": self.engine_records, "ignored_records": self.ignored_records,
                "mapped": self.mapped, "unmapped": self.unmapped,
                "engine_correlations": self.engine_correlations, "engine_duplicates": self.engine_duplicates}


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def is_run_id(text) -> bool:
    """Whether `text` is an id as `new_run_id` makes them (a name, never a path)."""
    return isinstance(text, str) and re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", text) is not None
