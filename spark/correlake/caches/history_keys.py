"""The key columns of silver (`transforms.scope.HistoryKeys`), kept in the process from
one run of a lake to its next.

Each run on Spark's path looks up the key groups its new records touch in them (a small
run looks them up with delta-rs instead, `run/small_scope.py`, and leaves nothing kept). Read from the lake,
they cost a Delta read and a checkpoint of every row of silver per run, growing with
the lake. A process that runs one lake again (the kept driver, `correlake serve`, a
warm benchmark) keeps them, as frames of its last run's checkpoints, as that run's publish
left them: the next run uses them only if that publish is still the lake's last one
(`_state/published.json` names it; a refresh of statuses, which leaves silver as it
is, carries them over) and silver's tables are at the versions it wrote;
otherwise (another process's run, maintenance, a rollback, another lake) they are read
from the lake as before. One lake at a time is kept.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from correlake.lake import journal
from correlake.transforms.scope import HistoryKeys

TABLES = ("silver_messages", "silver_workflow_events", "key_groups")  # what HistoryKeys are the key columns of


@dataclass(frozen=True)
class _Kept:
    lake: str
    run_id: str
    versions: dict[str, int]
    keys: HistoryKeys


_kept: _Kept | None = None


def kept(lake: str, versions: dict[str, int]) -> HistoryKeys | None:
    """The key columns kept for `lake` if its tables at `versions` (a run's snapshot) are
    what the kept run published, else None."""
    if _kept is None or _kept.lake != lake or any(versions[name] != v for name, v in _kept.versions.items()):
        return None
    record = journal.published(lake)
    return _kept.keys if record is not None and record.get("run_id") == _kept.run_id else None


def keep(lake: str, run_id: str, keys: HistoryKeys | None) -> None:
    """Keep `keys` (frames of checkpoints), as run `run_id` has just published them (None: a
    small run, which does not use them, gave none: nothing is kept)."""
    global _kept
    record = journal.published(lake)
    if keys is None or record is None or record.get("run_id") != run_id:
        _kept = None
        return
    _kept = _Kept(lake, run_id, _silver_versions(record), keys)


def carry(lake: str, before: dict | None, run_id: str) -> None:
    """Run `run_id` has just published over the record `before` without writing silver (a
    refresh of statuses): what was kept for `before` holds for it too."""
    global _kept
    record = journal.published(lake)
    if (_kept is not None and _kept.lake == lake and before is not None and before.get("run_id") == _kept.run_id
            and record is not None and record.get("run_id") == run_id and _silver_versions(record) == _kept.versions):
        _kept = _Kept(lake, run_id, _kept.versions, _kept.keys)


def _silver_versions(record: dict) -> dict[str, int]:
    """The versions of TABLES in a published record."""
    return {name: record["versions"].get(name) for name in TABLES}


@contextmanager
def set_aside():
    """Runs within the block (a driver's warm-up on lakes of its own) leave what is kept as it was."""
    global _kept
    before = _kept
    try:
        yield
    finally:
        _kept = before
