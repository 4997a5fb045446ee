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
    """Who holds the lock file at `path`: None if nobody (a stale lock is removed)."""
    try:
        holder = json.loads(path.read_text() or "{}")
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # being written: held
        return {}
    if holder and _stale(holder):  # an empty file is being written: held
        path.unlink(missing_ok=True)
        return None
    return holder


def _busy(path: Path, holder: dict) -> LakeBusy:
    return LakeBusy(f"another correlake run holds {path} (pid {holder.get('pid')} on {holder.get('host')}); "
                    "try again when it has finished")


def check_free(lake: str) -> None:
    """LakeBusy now if a run holds the lake's lock: a quick answer before a slow start
    (`run_lock` still takes the lock)."""
    path = lake_state_dir(lake) / "lock"
    if (holder := _holder(path)) is not None:
        raise _busy(path, holder)


@contextmanager
def run_lock(lake: str, wait_seconds: float = 0.0):
    """Hold the lake's lock: one run at a time. A lock left by a dead process is taken over."""
    path = _state(lake) / "lock"
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    deadline = time.time() + wait_seconds
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if (holder := _holder(path)) is None:
                continue
            if time.time() >= deadline:
                raise _busy(path, holder) from None
            time.sleep(1.0)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


# -- the run journal: all-or-nothing runs --------------------------------------------
def _journal(lake: str) -> Path:
    return _state(lake) / "inflight.json"


def unfinished_run(lake: str) -> str | None:
    """The id of a run that began to write and did not finish (crashed, killed), if any."""
    try:
        return json.loads((lake_state_dir(lake) / "inflight.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return None


def begin(lake: str, run_id: str) -> None:
    """Record every table's version before the run writes anything."""
    versions = {name: version(table_path(lake, name)) for name in TABLES}
    _journal(lake).write_text(json.dumps({"run_id": run_id, "versions": versions}))


def commit(lake: str) -> None:
    _journal(lake).unlink(missing_ok=True)


def rollback(spark: SparkSession, lake: str) -> str | None:
    """Undo the writes of an unfinished run (crashed or failed); return its id."""
    journal = _journal(lake)
    if not journal.exists():
        return None
    entry = json.loads(journal.read_text())
    for name, before in entry["versions"].items():
        path = table_path(lake, name)
        if before < 0:  # the run created the table, or began to (a log with no commit yet)
            shutil.rmtree(path, ignore_errors=True)
        elif version(path) != before:
            spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {before}")
    journal.unlink()
    return entry["run_id"]
