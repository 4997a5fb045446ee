"""What a run did: `RunResult`, returned by every run and recorded in `_meta/runs`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


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
    touched_groups: int = 0
    correlations: int = 0
    as_of: int | None = None
    max_event_time: int | None = None
    deployments: int = 0
    lines: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    nothing_new: bool = False  # no new landing file: at most a status refresh (as_of_before set)
    as_of_before: int | None = None  # nothing new: the as_of gold's statuses were at, when as_of moved
    rebuild: bool = False
    rolled_back: str | None = None  # the unfinished run this one rolled back first
    started_at: int = field(default_factory=lambda: int(time.time() * 1000))  # epoch millis

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())

    def top_quarantine_reasons(self, n: int) -> list[tuple[str, int, str | None]]:
        """The n most frequent reasons: (reason, lines, where its first line is)."""
        top = sorted(self.quarantined.items(), key=lambda kv: -kv[1])[:n]
        return [(reason, count, self.first_quarantined.get(reason)) for reason, count in top]
