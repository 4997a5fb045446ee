"""The interface of the run's backends (`run/backends/`): what a run asks of its execution
(`Backend`), what a backend needs of the run (`Run`), the scope it plans (`Scope`), and the
exception by which the driver backend gives a run to Spark (`TooLargeForDriver`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pyspark.sql import DataFrame

from correlake.config import DRIVER_ROOM_RECORDS
from correlake.errors import CorrelakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from correlake.run.result import RunResult
    from correlake.run.store import Plan
    from correlake.transforms.scope import HistoryKeys

DRIVER, SPARK = "driver", "spark"  # Plan.backend
FORCED = (DRIVER, SPARK)  # the backends CORRELAKE_RUN_PATH (config.RUN_PATHS) may force; else `auto`


class Snapshot(Protocol):
    """The lake's tables as a computation reads them: a run's snapshot (`Run`), or the lake as
    it is for a status refresh (`run/outbox.Current`, read by `Spark.outbox_of_touched` alone)."""
    spark: SparkSession

    def history(self, name: str) -> DataFrame | None:
        """A lake table as of the snapshot (None: none)."""


class Run(Snapshot, Protocol):
    """What a backend reads of its run (`staged.StagedRun`)."""
    lake_dir: str
    plan: Plan

    @property
    def run_id(self) -> str: ...

    @property
    def result(self) -> RunResult: ...

    def frame(self, name: str) -> DataFrame:
        """A frame an earlier stage of the run put in its store."""


class TooLargeForDriver(CorrelakeError):
    """The run touches more than the driver backend has room for: it runs on Spark."""


@dataclass
class Scope:
    """What the new records touch: the key group rows they add or change, the touched key
    groups' keys with where each group is replayed from (TOUCHED: `replay.py`), their distinct
    message records (MESSAGE_FIELDS) and their routed workflow events (with `label`) from
    there, and how many key groups that is."""
    key_group_changes: DataFrame
    touched_keys: DataFrame
    message_records: DataFrame
    routed: DataFrame
    touched_groups: int
    history_after: Callable[[DataFrame], HistoryKeys] | None = None  # silver's key columns after the publish


class Backend(Protocol):
    """What a run asks of its execution; `driver.Driver` and `spark.Spark` implement it."""
    name: str

    def plan_scope(self, new_messages: DataFrame, new_events: DataFrame, deployments: DataFrame,
                   redeployed: bool) -> Scope:
        """The run's scope (`transforms/scope.py`'s rules) from its new records."""

    def accepted_messages(self, records: DataFrame) -> DataFrame:
        """Silver's messages of the scope's records: rule 7's pass (`silver.accepted_messages`)."""

    def run_engine(self, events: DataFrame, deployments: dict[str, list[dict]]) -> DataFrame:
        """The engine over the touched key groups' records (`gold.run_engine`'s output)."""

    def touched(self):
        """The run's touched (tenant_id, correlation_key)s with their key groups' replay points, in
        the form `restate` and `refreshed` take."""

    def refreshed(self, rows: DataFrame, crossed: DataFrame, touched, since: str) -> DataFrame:
        """`rows` with the `crossed` rows of keys not `touched`, or of touched keys before their
        replay point by time column `since` (a status refresh in the same MERGE)."""

    def restate(self, name: str, rows: DataFrame, touched, keys: list[str], also: str | None = None) -> None:
        """The MERGE of `lake/restate.py` making table `name`'s rows of the `touched` keys (None:
        the keys of `rows`) exactly `rows`, its source of the rows that change computed here;
        `also`: a condition on the target (`t`) that its rows of the other keys of `rows` meet."""

    def outbox_of_touched(self, correlations: DataFrame, keys: DataFrame) -> tuple[DataFrame, DataFrame]:
        """(`correlations`, gold's correlations of the `keys` (SCOPE) with those of other keys
        that share an ordering line with them; the outbox's past events of those lines):
        what `transforms/outbox.outbox_events` is given."""

    def append(self, df: DataFrame, name: str) -> None:
        """Add the run's new rows `df` to table `name`."""


def forced(plan: Plan) -> bool:
    """Whether the run's backend is forced (CORRELAKE_RUN_PATH, `prepare`'s `path`), not `auto`."""
    return plan.path in FORCED


def driver_room(plan: Plan) -> int | None:
    """The engine records the driver backend takes before it gives the run to Spark (None: forced, no bound)."""
    return None if forced(plan) else DRIVER_ROOM_RECORDS
