"""A run's silver from exporter records (contract revision 4, *Mapping*): the run's new records
mapped onto the canonical streams with what the lake holds (its definitions, owner records,
start events, pairings and pending records), as the run's new message records and workflow
events; silver's machinery (`stages._silver`) then goes on as with canonical records. A
record that cannot be mapped yet waits in silver/engine_pending and is mapped by the run
that brings what it lacks: a new record of that run, a late one (semantics rule 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.config import BRONZE_TABLES, ENGINE_STREAM
from correlake.contract.engine_records import USED_SQL
from correlake.transforms import engine_definitions as defs
from correlake.transforms.engine_mapping import MSES, ends, kind, mappable, messages, named, start_pairs, with_value
from correlake.transforms.silver import distinct_records

if TYPE_CHECKING:
    from correlake.run.staged import StagedRun

TABLE = BRONZE_TABLES[ENGINE_STREAM]
_RECORD = ["partition_id", "position", "key", "timestamp", "record_type", "value_type", "intent", "tenant_id", "value"]
_DEFINITION = "process_definition_key"


@dataclass(frozen=True)
class Mapped:
    messages: DataFrame  # the run's new message records (MESSAGE_FIELDS)
    events: DataFrame  # its new workflow events, with a PROCESS_DEPLOYED of each deployment it changes (the scope's)
    appended: DataFrame  # those silver/workflow_events keeps (deployments are silver/deployments' rows)
    deployments: DataFrame  # every deployment


def is_engine_lake(run: StagedRun) -> bool:
    """Whether the lake reads exporter records (one kind of input per lake: contract revision 4)."""
    return run.plan.versions.get(TABLE, -1) >= 0 or bool(run.result.accepted.get(ENGINE_STREAM))


def mapped(run: StagedRun) -> Mapped:
    """The run's records mapped (a rebuild's: all of bronze's), silver/engine_definitions and
    silver/engine_pending put in the run's store, the run's counts and `as_of` (mapped records only)."""
    rebuild, store = run.result.rebuild, run.store
    old = (lambda name: None) if rebuild else run.history  # noqa: E731
    new = distinct_records(run.frame(TABLE))
    history = run.history(TABLE)
    if rebuild and history is not None:
        new, history = distinct_records(history).unionByName(new), None
    lake = new if history is None else distinct_records(history).unionByName(new)
    new = with_value(new.where(USED_SQL)).localCheckpoint()
    lookups = with_value(lake.where(F.col("value_type").isin(MSES, "PROCESS_INSTANCE") & F.expr(USED_SQL)))
    new_definitions = defs.definitions(new).localCheckpoint()
    every = _union(new_definitions, old("silver_engine_definitions")).localCheckpoint()
    names = defs.start_events(lookups)
    changed = (new_definitions.select(_DEFINITION)
               .unionByName(new.where(kind(MSES, "CREATED")).select(F.col("v.processDefinitionKey").alias(_DEFINITION))))
    changed_deployments = defs.deployments(every.join(changed, _DEFINITION, "left_semi"), names).localCheckpoint()
    old_pending = old("silver_engine_pending")
    waiting = new.where(kind("PROCESS_MESSAGE_SUBSCRIPTION", "CREATING") & mappable()).select(*_RECORD)
    if old_pending is not None:
        waiting = waiting.unionByName(old_pending.where(F.col("why") != defs.RESOURCE_DELETION).select(*_RECORD))
    owners = lookups.where(F.col("value_type") == "PROCESS_INSTANCE")
    opened, pending = defs.subscriptions(with_value(waiting), every, owners)
    pending = pending.unionByName(defs.deletions(new))
    if old_pending is not None:
        pending = pending.unionByName(old_pending.where(F.col("why") == defs.RESOURCE_DELETION))
    appended = named(opened.unionByName(ends(new)), start_pairs(lake)).localCheckpoint()
    new_messages = messages(new).localCheckpoint()
    store.put("silver_engine_definitions", every)
    result = run.result
    result.unmapped = store.put("silver_engine_pending", pending.localCheckpoint()).count()
    result.deployments = changed_deployments.count()
    result.new_messages, result.new_workflow_events = new_messages.count(), appended.count()
    result.mapped = result.new_messages + result.new_workflow_events + new_definitions.count()
    times = [frame.select(F.unix_millis(column).alias("t")) for frame, column in (
        (new_messages, "published_at"), (appended, "timestamp"), (new_definitions, "deployed_at"))]
    result.count_mapped_time(times[0].unionByName(times[1]).unionByName(times[2]).agg(F.max("t")).first()[0])
    return Mapped(new_messages, appended.unionByName(defs.deployed_events(changed_deployments)), appended,
                  defs.deployments(every, names))


def _union(new: DataFrame, old: DataFrame | None) -> DataFrame:
    return new if old is None else old.select(*new.columns).unionByName(new)
