"""The run journal that makes a run all-or-nothing: `<lake>/_state/inflight.json` records
every table's version before a run writes; an unfinished run (crashed, killed, failed) is
rolled back to them (Delta's `RESTORE`, by delta-rs) by the next."""

from __future__ import annotations

import json
from contextlib import contextmanager

from pyspark.sql import SparkSession

from correlake.config import TABLES, table_path
from correlake.errors import CorrelakeError
from correlake.lake import deltars
from correlake.lake.files import remove_tree, state
from correlake.lake.lock import check_held
from correlake.lake.tables import version
from correlake.runtime.signals import interrupts_held

UNREADABLE_JOURNAL = "(unknown: its journal cannot be read)"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class UnreadableJournal(CorrelakeError):
    """The journal of an unfinished run cannot be read: what it wrote cannot be rolled back."""


JOURNAL, PUBLISHED = "inflight.json", "published.json"


def journal_path(lake: str) -> str:
    return state(lake).where(JOURNAL)


def has_journal(lake: str) -> bool:
    """Whether a run's journal is there (readable or not)."""
    try:
        return state(lake).read(JOURNAL) is not None
    except OSError:
        return True


def unfinished_run(lake: str) -> str | None:
    """The id of a run that began to write and did not finish (crashed, killed), if any."""
    try:
        text = state(lake).read(JOURNAL)
        return None if text is None else str(json.loads(text)["run_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return UNREADABLE_JOURNAL


def begin(lake: str, run_id: str) -> None:
    """Record every table's version before the run writes anything."""
    versions = {name: version(table_path(lake, name)) for name in TABLES}
    state(lake).write(JOURNAL, json.dumps({"run_id": run_id, "versions": versions}))


def commit(lake: str, run_id: str) -> None:
    state(lake).delete(JOURNAL)
    mark_published(lake, run_id)


def mark_published(lake: str, run_id: str | None = None) -> None:
    """Record every table's version as published, and by which run (None: no run's, as after a
    rollback or maintenance): what readers outside the lake lock (the delivery pass) read,
    so that they never see a run's writes before it finished, nor writes a failed run
    rolled back. Called once no run is in flight (a commit, a rollback)."""
    versions = {name: version(table_path(lake, name)) for name in TABLES}
    state(lake).write(PUBLISHED, json.dumps({"versions": versions, "run_id": run_id}))


def published(lake: str) -> dict | None:
    """The record `mark_published` left ({"versions": {table: version}, "run_id": ...}),
    None if there is none or it cannot be read."""
    try:
        record = json.loads(state(lake).read(PUBLISHED))
    except (OSError, ValueError, TypeError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("versions"), dict) else None


def published_version(lake: str, name: str) -> int | None:
    """The table's version as the last finished run left it (None: no run finished yet, or
    the record cannot be read). A time-travel read of it is consistent with gold."""
    value = (published(lake) or {"versions": {}})["versions"].get(name)
    return value if isinstance(value, int) and value >= 0 else None


def rollback(lake: str) -> str | None:
    """Undo the writes of an unfinished run (crashed or failed); return its id."""
    try:
        if (text := state(lake).read(JOURNAL)) is None:
            return None
        entry = json.loads(text)
        run_id, versions = entry["run_id"], dict(entry["versions"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableJournal(
            f"the journal of an unfinished run, {journal_path(lake)}, cannot be read ({exc}): its writes cannot be rolled "
            "back. Look at each table's DESCRIBE HISTORY, RESTORE what that run wrote, then remove the "
            "file") from None
    with interrupts_held():
        for name, before in versions.items():
            path = table_path(lake, name)
            if before < 0:  # the run created the table, or began to (a log with no commit yet)
                remove_tree(path)
            elif version(path) != before:
                deltars.restore(lake, name, before)  # a commit of delta-rs: milliseconds, where Spark's took seconds
        state(lake).delete(JOURNAL)
        mark_published(lake)
    return run_id


@contextmanager
def journalled(spark: SparkSession, lake: str, run_id: str):
    """The writes of run `run_id`: all kept, or all rolled back (also by the next run, after a crash).
    LockLost first if this process lost the lake's lock."""
    check_held(lake)
    begin(lake, run_id)
    spark.conf.set(USER_METADATA, run_id)
    try:
        yield
    except BaseException:
        rollback(lake)
        raise
    finally:
        spark.conf.unset(USER_METADATA)
    commit(lake, run_id)
