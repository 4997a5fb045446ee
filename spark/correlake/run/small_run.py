"""The small-run path's reads (docs/design.md, *The small-run path*): a run whose touched
key groups hold few engine records takes them to the driver as local frames — the run's
new records fetched from its frames, silver's of the touched keys read with delta-rs in
the run's snapshot (files skipped by their statistics) — where rule 7 and the engine
run (`transforms/sequential.sequential_pass_on_driver`), not through Spark's joins with
the history and its Python workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from correlake.config import SMALL_RUN_MAX_RECORDS
from correlake.contract.schemas import MESSAGE_FIELDS, SCOPE
from correlake.lake import deltars
from correlake.transforms.scope import Recompute

if TYPE_CHECKING:
    from correlake.run.staged import StagedRun


def message_records(run: StagedRun, work: Recompute, new_messages: DataFrame, history: bool) -> DataFrame | None:
    """The run's path chosen (config.RUN_PATHS): the touched key groups' message records as a
    local frame (the run's new ones, each of a touched key, and silver's of the touched
    keys); None for Spark's path: forced, or the key groups hold more than
    SMALL_RUN_MAX_RECORDS engine records (their messages and routed events). `history`:
    whether silver's tables are read (not a first run, not a rebuild)."""
    if run.plan.path == "spark":
        return None
    room = None if run.plan.path == "small" else SMALL_RUN_MAX_RECORDS - work.routed_count
    if room is not None and room < 0:
        return None
    keys = work.scope.select(*SCOPE)  # each key has a record of its own: more keys than room, more records
    keys = (keys if room is None else keys.limit(room + 1)).toArrow()
    new = new_messages.select(*MESSAGE_FIELDS).toArrow()
    if room is not None and max(keys.num_rows, new.num_rows) > room:
        return None
    table = deltars.table(run.lake_dir, "silver_messages", run.plan.versions["silver_messages"]) if history else None
    old = deltars.rows_of_keys(table, ["message_key", *MESSAGE_FIELDS[1:]], set(deltars.tuples(keys)))
    if old is not None:
        new = pa.concat_tables([new, old.rename_columns(MESSAGE_FIELDS).cast(new.schema)])
    if room is not None and new.num_rows > room:
        return None
    return run.spark.createDataFrame(new, new_messages.select(*MESSAGE_FIELDS).schema)


def routed_events(run: StagedRun, work: Recompute, new_events: DataFrame, history: bool) -> DataFrame:
    """A small run's routed workflow events, one row per (event, label) as Spark's path joins
    them, as a local frame: of the run's new events and of silver's, read with delta-rs at
    the routed positions in the run's snapshot."""
    routed = work.routed_labels.toArrow()
    positions = set(routed["position"].to_pylist())
    events = new_events.toArrow()
    events = events.filter(pa.array([p in positions for p in events["position"].to_pylist()], pa.bool_()))
    if history:
        table = deltars.table(run.lake_dir, "silver_workflow_events", run.plan.versions["silver_workflow_events"])
        if (old := deltars.rows_in(table, events.schema.names, "position", positions, events.schema)) is not None:
            events = pa.concat_tables([events, old])
    at = {p: i for i, p in enumerate(events["position"].to_pylist())}
    pairs = [(at[p], label) for p, label in deltars.tuples(routed) if p in at]
    rows = events.take(pa.array([i for i, _ in pairs], pa.int64()))
    rows = rows.append_column("label", pa.array([label for _, label in pairs], pa.string()))
    return run.spark.createDataFrame(rows, StructType([*new_events.schema.fields, StructField("label", StringType())]))
