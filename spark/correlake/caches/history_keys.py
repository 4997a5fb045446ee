"""The history-key cache: the key columns of silver (`transforms.scope.HistoryKeys`), held
in the process from one run of a lake to its next.

Each run on the Spark backend looks up the key groups its new records touch in them (a run
on the driver backend looks them up with delta-rs instead, and caches nothing). Read from the lake,
they cost a Delta read and a checkpoint of every row of silver per run, growing with
the lake. A process that runs one lake again (a long-lived driver, a warm benchmark)
caches them, as frames of its last run's checkpoints, as that run's publish
left them: the next run uses them only if that publish is still the lake's last one
(`_state/published.json` names it; a refresh of statuses, which leaves silver as it
is, carries them over) and silver's tables are at the versions it wrote;
otherwise (another process's run, maintenance, a rollback, another lake) they are read
from the lake as before. One lake at a time is cached.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from correlake.lake import journal
from correlake.transforms.scope import HistoryKeys

TABLES = ("silver_messages", "silver_workflow_events", "key_groups")  # what HistoryKeys are the key columns of


@dataclass(frozen=True)
class _Entry:
    lake: str
    run_id: str
    versions: dict[str, int]
    keys: HistoryKeys


_entry: _Entry | None = None


def cached(lake: str, versions: dict[str, int]) -> HistoryKeys | None:
    """The key columns cached for `lake` if its tables at `versions` (a run's snapshot) are
    what the cached run published, else None."""
    if _entry is None or _entry.lake != lake or any(versions[name] != v for name, v in _entry.versions.items()):
        return None
    record = journal.published(lake)
    return _entry.keys if record is not None and record.get("run_id") == _entry.run_id else None


def store(lake: str, run_id: str, keys: HistoryKeys | None) -> None:
    """Cache `keys` (frames of checkpoints), as run `run_id` has just published them (None: a
    run on the driver, which does not use them, gave none: nothing is cached)."""
    global _entry
    record = journal.published(lake)
    if keys is None or record is None or record.get("run_id") != run_id:
        _entry = None
        return
    _entry = _Entry(lake, run_id, _silver_versions(record), keys)


def carry(lake: str, before: dict | None, run_id: str) -> None:
    """Run `run_id` has just published over the record `before` without writing silver (a
    refresh of statuses): what was cached for `before` holds for it too."""
    global _entry
    record = journal.published(lake)
    if (_entry is not None and _entry.lake == lake and before is not None and before.get("run_id") == _entry.run_id
            and record is not None and record.get("run_id") == run_id and _silver_versions(record) == _entry.versions):
        _entry = _Entry(lake, run_id, _entry.versions, _entry.keys)


def _silver_versions(record: dict) -> dict[str, int]:
    """The versions of TABLES in a published record."""
    return {name: record["versions"].get(name) for name in TABLES}


@contextmanager
def set_aside():
    """Runs within the block (a driver's warm-up on lakes of its own) leave what is cached as it was."""
    global _entry
    before = _entry
    try:
        yield
    finally:
        _entry = before
