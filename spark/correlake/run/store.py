"""A run's plan, and where its frames live between stages: in the Spark session when
one process runs every stage (`MemoryStore`), as Parquet under
`<lake>/_state/runs/<run_id>/` when each stage is an Airflow task (`DiskStore`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from pyspark.sql import DataFrame, SparkSession

from correlake.config import (
    ENGINE_STREAM,
    GATES_BESIDE_MAX_BYTES,
    INTERPRETED_MAX_BYTES,
    INTERPRETED_MAX_HISTORY,
    STAGED_RUN_MAX_AGE_SECONDS,
    TABLES,
    join,
)
from correlake.lake.files import folder_ages, remove_tree, state
from correlake.lake.landing import LandingFile
from correlake.run.result import RunResult, is_run_id


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
    path: str = "auto"  # the run's path asked for (config.RUN_PATHS): `auto` lets its size decide
    full_listing: bool = False  # whether its files were found by a full listing (lake/discovery.py)
    held: dict[str, str] = field(default_factory=dict)  # stream -> its lowest listed file that could not be read
    backend: str = "spark"  # where its stages run (run/backends: `choose`), named once when it is planned

    @property
    def interpreted(self) -> bool:
        """Few new records (at most INTERPRETED_MAX_BYTES of JSON) on a small lake (at most
        INTERPRETED_MAX_HISTORY records), and not a rebuild."""
        return (not self.result.rebuild and self.history_records <= INTERPRETED_MAX_HISTORY
                and self._json_bytes <= INTERPRETED_MAX_BYTES)

    @property
    def gates_beside(self) -> bool:
        """Whether each gate is checked beside the next stage: at most GATES_BESIDE_MAX_BYTES
        of new JSON, and not a rebuild."""
        return not self.result.rebuild and self._json_bytes <= GATES_BESIDE_MAX_BYTES

    @property
    def engine_input(self) -> bool:
        """Whether the run reads Zeebe exporter records (its lake is one of them)."""
        return any(f.stream == ENGINE_STREAM for f in self.files)

    @property
    def _json_bytes(self) -> int:
        return sum(f.json_bytes for f in self.files)

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
                   raw.get("history_records", 0), raw.get("path", "auto"), raw.get("full_listing", False),
                   raw.get("held", {}), raw.get("backend", "spark"))


class MemoryStore:
    """Frames kept in the Spark session, checkpointed or as views of checkpointed ones:
    one process runs every stage."""

    def __init__(self):
        self._frames: dict[str, DataFrame] = {}

    def put(self, name: str, df: DataFrame, checkpoint: bool = True) -> DataFrame:
        """Keep `df`, checkpointed; without `checkpoint`, as it is (for rows and columns of
        checkpointed frames: reading them again costs a scan, copying them memory)."""
        self._frames[name] = df.localCheckpoint() if checkpoint else df
        return self._frames[name]

    def get(self, spark: SparkSession, name: str) -> DataFrame:
        return self._frames[name]

    def save_plan(self, plan: Plan) -> None:
        """Nothing to do: the plan lives in the caller's StagedRun."""

    def clear(self) -> None:
        self._frames.clear()


class DiskStore:
    """Frames staged as Parquet under the run's folder, in the lake (a folder or object
    storage): each stage may be its own process, on its own machine."""

    def __init__(self, lake: str, run_id: str):
        self.lake, self.name = lake, f"runs/{run_id}"
        self.root = join(lake, "_state", "runs", run_id)

    def put(self, name: str, df: DataFrame, checkpoint: bool = True) -> DataFrame:
        """Write `df` (`checkpoint` or not: the next stage may be another process)."""
        df.write.mode("overwrite").parquet(f"{self.root}/{name}")
        return df.sparkSession.read.parquet(f"{self.root}/{name}")

    def get(self, spark: SparkSession, name: str) -> DataFrame:
        return spark.read.parquet(f"{self.root}/{name}")

    def save_plan(self, plan: Plan) -> None:
        state(self.lake).write(f"{self.name}/plan.json", plan.to_json())

    def has_plan(self) -> bool:
        return state(self.lake).read(f"{self.name}/plan.json") is not None

    def load_plan(self) -> Plan:
        if (text := state(self.lake).read(f"{self.name}/plan.json")) is None:
            raise FileNotFoundError(f"no staged run at {self.root} (discarded, published, or never prepared)")
        return Plan.from_json(text)

    def clear(self) -> None:
        remove_tree(self.root)


def staged_runs_dir(lake: str) -> str:
    return join(lake, "_state", "runs")


def staged_run(lake: str, run_id: str) -> DiskStore:
    """Where run `run_id` of the lake is staged; ValueError for what is not a run id (which
    could name a folder elsewhere: `../..`)."""
    if not is_run_id(run_id):
        raise ValueError(f"not a run id: {str(run_id)[:80]!r}")
    return DiskStore(lake, run_id)


def forget_old_staged_runs(lake: str) -> None:
    """Delete what runs staged more than STAGED_RUN_MAX_AGE_SECONDS ago (abandoned)."""
    for run_id, age in folder_ages(staged_runs_dir(lake)).items():
        if age > STAGED_RUN_MAX_AGE_SECONDS:
            remove_tree(f"{staged_runs_dir(lake)}/{run_id}")
