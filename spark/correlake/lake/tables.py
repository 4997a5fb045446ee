"""Thin readers and writers of the lake's Delta tables, the run lock and the
run journal that makes a run all-or-nothing."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from correlake.config import (DELETION_VECTOR_TABLES, LOCK_FOREIGN_STALE_SECONDS, LOCK_STALE_SECONDS, TABLES,
                     lake_state_dir, table_path)
from correlake.errors import UsageError
from correlake.session import interrupts_held
from correlake.lake.sqlfiles import delta_table


class LakeBusy(RuntimeError):
    """Another run holds the lake's lock."""


def is_table(path: str) -> bool:
    return version(path) >= 0


def require_folder(lake: str | Path) -> None:
    """UsageError unless the lake folder exists (a command that reads a lake, not a run)."""
    if not Path(lake).is_dir():
        raise UsageError(f"lake folder {lake} does not exist")


def require_bronze(lake: str) -> None:
    """A rebuild's source: UsageError if the lake holds no bronze."""
    if not (Path(lake) / "bronze").is_dir():
        raise UsageError(f"{lake} holds no bronze tables to rebuild from")


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
    """Create the table with `df` as its first version (deletion vectors on for some, see
    DELETION_VECTOR_TABLES)."""
    deletion_vectors = str(name in DELETION_VECTOR_TABLES).lower()
    _writer(df, run_id).option("delta.enableDeletionVectors", deletion_vectors).save(table_path(lake, name))


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


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


def _read(path: Path):
    """The lock file's content as JSON; None if it is not JSON. OSError if it cannot be read."""
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def _holder(path: Path) -> dict | None:
    """Who holds the lock at `path`: None if nobody does (no lock, or a stale one)."""
    try:
        holder = _read(path)
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    except OSError:  # a lock it cannot read: held, by someone it cannot name
        return {}
    if not isinstance(holder, dict):  # not written by a run (their locks are whole): stale once old
        return None if age > LOCK_FOREIGN_STALE_SECONDS else {}
    return None if _stale(holder) else holder


@contextmanager
def flocked(path: Path):
    """Hold an exclusive `flock` on `path` (created if need be) while the block runs: one
    process at a time. Released when the block ends, or its process dies."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _guarded(lake: str):
    """Every change of the lake's lock file (taking it, taking a stale one over, releasing it)
    one process at a time: two processes never both take over one stale lock."""
    return flocked(_state(lake) / "lock.guard")


def _take(lake: str, me: dict) -> dict | None:
    """Take the lake's lock (free or stale): None; else who holds it."""
    path = lock_path(lake)
    with _guarded(lake):
        if (holder := _holder(path)) is not None:
            return holder
        for tmp in path.parent.glob(".*.tmp"):  # left by a process killed while it wrote its lock or journal
            tmp.unlink(missing_ok=True)
        write_atomic(path, json.dumps(me))
    return None


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
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    deadline = time.time() + wait_seconds
    while (holder := _take(lake, me)) is not None:
        if time.time() >= deadline:
            raise _busy(lock_path(lake), holder)
        time.sleep(1.0)
    try:
        yield
    finally:
        with _guarded(lake):  # its own lock only (one taken over from it, as stale, is another's)
            try:
                if _read(lock_path(lake)) == me:
                    lock_path(lake).unlink()
            except FileNotFoundError:
                pass


# -- the run journal: all-or-nothing runs --------------------------------------------
class UnreadableJournal(RuntimeError):
    """The journal of an unfinished run cannot be read: what it wrote cannot be rolled back."""


UNREADABLE_JOURNAL = "(unknown: its journal cannot be read)"


def unfinished_run(lake: str) -> str | None:
    """The id of a run that began to write and did not finish (crashed, killed), if any."""
    try:
        return str(json.loads(journal_path(lake).read_text())["run_id"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return UNREADABLE_JOURNAL


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
    with interrupts_held():
        for name, before in versions.items():
            path = table_path(lake, name)
            if before < 0:  # the run created the table, or began to (a log with no commit yet)
                shutil.rmtree(path, ignore_errors=True)
            elif version(path) != before:
                spark.sql(f"RESTORE TABLE {delta_table(path)} TO VERSION AS OF {before}")
        journal.unlink()
    return run_id
