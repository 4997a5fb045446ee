"""Which landing files are new, at a cost that follows what is new (docs/design.md *Discovery*).

Where producers write lexically ordered paths per stream (declared by
CORRELAKE_FULL_LISTING_HOURS; by default every run lists the whole landing), the lake keeps, per stream, its mark:
the greatest path below which every listed file of its landing was ingested (`_state/discovery.json`,
written after a run's publish, so that a failed or rolled back run never moves it). A run
lists only the paths at or after the marks (the mark's own file included: it may have
grown) and reads `_meta/ingested_files` by that range. A full listing, every
`config.full_listing_seconds()` or on demand, finds what was written below a mark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from correlake.config import LANDING_STREAMS, full_listing_seconds
from correlake.lake import meta
from correlake.lake.files import state
from correlake.lake.landing import LandingFile, listing, root_of

RECORD = "discovery.json"


@dataclass(frozen=True)
class Found:
    files: list[LandingFile]  # the new files, sorted by path
    full: bool  # whether the whole landing was listed
    held: dict[str, str] = field(default_factory=dict)  # stream -> its lowest listed file that cannot be read


def _record(lake: str) -> dict:
    try:
        return json.loads(state(lake).read(RECORD) or "{}")
    except (OSError, ValueError):
        return {}  # unreadable: a full listing, and the next publish writes it again


def _write(lake: str, landing_root: str, marks: dict[str, str], full_listed_at: int | None) -> None:
    state(lake).write(RECORD, json.dumps({"landing": landing_root, "marks": marks, "full_listed_at": full_listed_at}))


def now_ms() -> int:
    return int(time.time() * 1000)


def marks(lake: str, landing: str, full: bool = False, now: int | None = None) -> dict[str, str] | None:
    """Each stream's mark for an incremental listing of `landing` ("": the whole stream), or None
    when the listing is a full one: asked for, always (no interval set), due (the interval
    since the last), no mark yet, or the marks of another landing."""
    record, every = _record(lake), full_listing_seconds() * 1000
    last, found = record.get("full_listed_at"), record.get("marks") or {}
    now = now_ms() if now is None else now
    if (full or not every or not found or last is None or now - last >= every
            or record.get("landing") != root_of(landing)):
        return None
    return {stream: found.get(stream, "") for stream in LANDING_STREAMS}


def find(landing: str, lake: str, full: bool = False, now: int | None = None) -> Found:
    """The landing's new files: those whose (path, size, mtime) was not ingested; one larger
    than the largest version of its path ingested grew in place (`LandingFile.read_before`).
    Where the landing is declared ordered, a full listing that finds nothing new is recorded
    as the last one (else nothing is written: a full listing is every run's)."""
    after = marks(lake, landing, full, now)
    if after is not None:
        ingested = meta.ingested(lake, after)
        paths = {path for path, _, _ in ingested}
        if all(not mark or mark in paths for mark in after.values()):
            return _found(landing, ingested, after)
        # a mark no longer among the ingested files (the table restored): a full listing
    found = _found(landing, meta.ingested(lake), None)
    record = _record(lake)
    if (full_listing_seconds() and not found.files and record.get("marks")
            and record.get("landing") == root_of(landing)):
        _write(lake, record["landing"], record["marks"], now_ms() if now is None else now)
    return found


def _found(landing: str, ingested: set[tuple], after: dict[str, str] | None) -> Found:
    files, held = listing(landing, after)
    read = {}
    for path, size, _ in ingested:
        read[path] = max(read.get(path, 0), size)
    new = [f.grown(read.get(f.path, 0)) for f in files if f.identity not in ingested]
    return Found(new, after is None, held)


def record_published(lake: str, files: list[LandingFile], not_read: set[str], full: bool, held: dict[str, str],
                     now: int | None = None) -> None:
    """After a run's publish of `files` (those in `not_read` refused when read): each stream's
    mark moved to the greatest path the run ingested below the lowest it could not (`held`:
    listed, or refused), never back; and the time of a full listing."""
    record, root = _record(lake), files[0].root
    moved = dict(record.get("marks") or {}) if record.get("landing") == root else {}
    for stream in LANDING_STREAMS:
        refused = [f.path for f in files if f.stream == stream and f.path in not_read]
        below = min(filter(None, [held.get(stream), *refused]), default=None)
        paths = [f.path for f in files if f.stream == stream and f.path not in not_read
                 and (below is None or f.path < below)]
        if paths and max(paths) > moved.get(stream, ""):
            moved[stream] = max(paths)
    last = (now_ms() if now is None else now) if full else record.get("full_listed_at")
    if moved != record.get("marks") or last != record.get("full_listed_at") or root != record.get("landing"):
        _write(lake, root, moved, last)
