"""Thin readers and writers of the lake's Delta tables, the run lock and the
run journal that makes a run all-or-nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from .config import LOCK_STALE_SECONDS, TABLES, lake_state_dir, table_path
from .sqlfiles import delta_table


class LakeBusy(RuntimeError):
    """Another run holds the lake's lock."""


def is_table(path: str) -> bool:
    return version(path) >= 0


def read(spark: SparkSession, lake: str, name: str, schema: StructType) -> DataFrame:
    """The table as a DataFrame; an empty one of `schema` if it does not exist yet."""
    path = table_path(lake, name)
    if is_table(path):
        return spark.read.format("delta").load(path)
    return spark.createDataFrame([], schema)


def version(path: str) -> int:
    """The table's latest version (-1 if none), from its commit files: no Spark job."""
    log = Path(path) / "_delta_log"
    if not log.is_dir():
        return -1
    commits = [int(p.stem) for p in log.glob("*.json") if p.stem.isdigit()]
    return max(commits, default=-1)


def _writer(df: DataFrame, run_id: str):
    return df.write.format("delta").option("userMetadata", run_id)


def append(df: DataFrame, lake: str, name: str, run_id: str) -> None:
    _writer(df, run_id).mode("append").save(table_path(lake, name))


def overwrite(df: DataFrame, lake: str, name: str, run_id: str) -> None:
    """Replace the table's content (same schema; a new version, history kept)."""
    _writer(df, run_id).mode("overwrite").save(table_path(lake, name))


def create(df: DataFrame, lake: str, name: str, run_id: str) -> None:
    """Create the table with `df` as its first version (deletion vectors on, for MERGEs)."""
    _writer(df, run_id).option("delta.enableDeletionVectors", "true").save(table_path(lake, name))


# -- the run lock --------------------------------------------------------------------
def _state(lake: str) -> Path:
    path = lake_state_dir(lake)
    path.mkdir(parents=True, exist_ok=True)
    return path


def lock_path(lake: str) -> Path:
    return lake_state_dir(lake) / "lock"


def journal_path(lake: str) -> Path:
    return lake_state_dir(lake) / "inflight.json"


def write_atomic(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a full disk, a kill mid-write leave the old file)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    return True


def _stale(holder: dict) -> bool:
    if time.time() - holder.get("started", 0) > LOCK_STALE_SECONDS:
        return True
    return holder.get("host") == socket.gethostname() and not _pid_alive(holder.get("pid", -1))


def _holder(path: Path) -> dict | None:
    """Who holds the lock file at `path`: None if nobody (a stale or unreadable lock is removed)."""
    try:
        holder = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # a lock file is whole from its start (`_take`): not one of ours
        holder = {}
    if not isinstance(holder, dict) or _stale(holder):
        path.unlink(missing_ok=True)
        return None
    return holder


def _take(path: Path, me: dict) -> bool:
    """Create the lock file at `path` with its content in one step; False if it exists."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(me))
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _busy(path: Path, holder: dict) -> LakeBusy:
    return LakeBusy(f"another correlake run holds {path} (pid {holder.get('pid')} on {holder.get('host')}); "
                    "try again when it has finished")


def check_free(lake: str) -> None:
    """LakeBusy now if a run holds the lake's lock: a quick answer before a slow start
    (`run_lock` still takes the lock)."""
    path = lock_path(lake)
    if (holder := _holder(path)) is not None:
        raise _busy(path, holder)


@contextmanager
def run_lock(lake: str, wait_seconds: float = 0.0):
    """Hold the lake's lock: one run at a time. A lock left by a dead process is taken over."""
    _state(lake)
    path = lock_path(lake)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    deadline = time.time() + wait_seconds
    while not _take(path, me):
        if (holder := _holder(path)) is None:
            continue
        if time.time() >= deadline:
            raise _busy(path, holder)
        time.sleep(1.0)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


# -- the run journal: all-or-nothing runs --------------------------------------------
class UnreadableJournal(RuntimeError):
    """The journal of an unfinished run cannot be read: what it wrote cannot be rolled back."""


def unfinished_run(lake: str) -> str | None:
    """The id of a run that began to write and did not finish (crashed, killed), if any."""
    try:
        return json.loads(journal_path(lake).read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return None


def begin(lake: str, run_id: str) -> None:
    """Record every table's version before the run writes anything."""
    versions = {name: version(table_path(lake, name)) for name in TABLES}
    _state(lake)
    write_atomic(journal_path(lake), json.dumps({"run_id": run_id, "versions": versions}))


def commit(lake: str) -> None:
    journal_path(lake).unlink(missing_ok=True)


def rollback(spark: SparkSession, lake: str) -> str | None:
    """Undo the writes of an unfinished run (crashed or failed); return its id."""
    journal = journal_path(lake)
    if not journal.exists():
        return None
    try:
        entry = json.loads(journal.read_text())
        run_id, versions = entry["run_id"], dict(entry["versions"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableJournal(
            f"the journal of an unfinished run, {journal}, cannot be read ({exc}): its writes cannot be rolled "
            "back. Look at each table's DESCRIBE HISTORY, RESTORE what that run wrote, then remove the "
            "file") from None
    for name, before in versions.items():
        path = table_path(lake, name)
        if before < 0:  # the run created the table, or began to (a log with no commit yet)
            shutil.rmtree(path, ignore_errors=True)
        elif version(path) != before:
            spark.sql(f"RESTORE TABLE {delta_table(path)} TO VERSION AS OF {before}")
    journal.unlink()
    return run_id
