"""A run's plan, and where its frames live between stages: in the Spark session when
one process runs every stage (`MemoryStore`), as Parquet under
`<lake>/_state/runs/<run_id>/` when each stage is an Airflow task (`DiskStore`)."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from correlake.config import (INTERPRETED_MAX_BYTES, INTERPRETED_MAX_HISTORY, STAGED_RUN_MAX_AGE_SECONDS, TABLES,
                              lake_state_dir)
from correlake.lake.files import write_atomic
from correlake.lake.landing import LandingFile
from correlake.run.result import RunResult


@dataclass
class Plan:
    """What a run works on: its files, its snapshot of the lake, its settings, its result so far."""
    run_id: str
    files: list[LandingFile]
    versions: dict[str, int]
    max_quarantine_ratio: float
    last_event_time: int | None
    result: RunResult
    history_records: int = 0  # the records the lake's runs read before this one

    @property
    def small(self) -> bool:
        """Few new records (at most INTERPRETED_MAX_BYTES of JSON) on a small lake (at most
        INTERPRETED_MAX_HISTORY records), and not a rebuild."""
        return (not self.result.rebuild and self.history_records <= INTERPRETED_MAX_HISTORY
                and sum(f.json_bytes for f in self.files) <= INTERPRETED_MAX_BYTES)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "files": [asdict(f) for f in self.files]})

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """The plan saved by `to_json`; ValueError for one staged by a version of correlake
        whose lake had other tables (its run cannot be published: a new run starts over)."""
        raw = json.loads(text)
        if set(raw["versions"]) != set(TABLES):
            raise ValueError(f"run {raw['run_id']} was staged by another version of correlake (lake tables "
                             f"{sorted(raw['versions'])}); it cannot be published: start a new run")
        return cls(raw["run_id"], [LandingFile(**f) for f in raw["files"]], raw["versions"],
                   raw["max_quarantine_ratio"], raw["last_event_time"], RunResult(**raw["result"]),
                   raw.get("history_records", 0))


class MemoryStore:
    """Frames kept in the Spark session, checkpointed or as views of checkpointed ones:
    one process runs every stage."""

    def __init__(self):
        self._frames: dict[str, DataFrame] = {}

    def put(self, name: str, df: DataFrame, narrow: bool = False) -> DataFrame:
        """Keep `df`, checkpointed; a `narrow` frame (rows and columns of checkpointed
        frames) is kept as it is: reading it again costs a scan, copying it memory."""
        self._frames[name] = df if narrow else df.localCheckpoint()
        return self._frames[name]

    def get(self, spark: SparkSession, name: str) -> DataFrame:
        return self._frames[name]

    def save_plan(self, plan: Plan) -> None:
        """Nothing to do: the plan lives in the caller's StagedRun."""

    def clear(self) -> None:
        self._frames.clear()


class DiskStore:
    """Frames staged as Parquet under the run's folder: each stage may be its own process."""

    def __init__(self, root: Path):
        self.root = root

    def put(self, name: str, df: DataFrame, narrow: bool = False) -> DataFrame:
        """Write `df` (narrow or not: the next stage may be another process)."""
        path = str(self.root / name)
        df.write.mode("overwrite").parquet(path)
        return df.sparkSession.read.parquet(path)

    def get(self, spark: SparkSession, name: str) -> DataFrame:
        return spark.read.parquet(str(self.root / name))

    def save_plan(self, plan: Plan) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomic(self.root / "plan.json", plan.to_json())

    def has_plan(self) -> bool:
        return (self.root / "plan.json").exists()

    def load_plan(self) -> Plan:
        if not self.has_plan():
            raise FileNotFoundError(f"no staged run at {self.root} (discarded, published, or never prepared)")
        return Plan.from_json((self.root / "plan.json").read_text())

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def staged_runs_dir(lake_dir: str) -> Path:
    return lake_state_dir(lake_dir) / "runs"


def staged_run(lake_dir: str, run_id: str) -> DiskStore:
    """Where run `run_id` of the lake is staged."""
    return DiskStore(staged_runs_dir(lake_dir) / run_id)


def forget_old_staged_runs(lake_dir: str) -> None:
    """Delete what runs staged more than STAGED_RUN_MAX_AGE_SECONDS ago (abandoned)."""
    root = staged_runs_dir(lake_dir)
    if root.is_dir():
        for staged in root.iterdir():
            try:
                age = time.time() - staged.stat().st_mtime
            except FileNotFoundError:  # discarded meanwhile by another run
                continue
            if age > STAGED_RUN_MAX_AGE_SECONDS:
                shutil.rmtree(staged, ignore_errors=True)
