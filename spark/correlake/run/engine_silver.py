"""A run's silver from exporter records (contract revision 4, *Mapping*): the run's new records
mapped onto the canonical streams with what the lake holds (its definitions, owner records,
start events, pairings and pending records), as the run's new message records and workflow
events; silver's machinery (`stages._silver`) then goes on as with canonical records. A
record that cannot be mapped yet waits in silver/engine_pending and is mapped by the run
that brings what it lacks: a new record of that run, a late one (semantics rule 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from correlake.config import BRONZE_TABLES, ENGINE_STREAM
from correlake.contract.engine_records import USED_SQL
from correlake.transforms import engine_definitions as defs
from correlake.transforms.engine_audit import correlated
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
    """The run's records mapped (a rebuild's: all of bronze's), their `value` read once;
    silver/engine_definitions, silver/engine_pending and what gold's audit reads (the run's
    CORRELATED records, the lake's and the run's start pairings) put in the run's store;
    the run's counts and `as_of` (mapped records only)."""
    rebuild, store = run.result.rebuild, run.store
    old = (lambda name: None) if rebuild else run.history  # noqa: E731
    records, history = distinct_records(run.frame(TABLE)), run.history(TABLE)
    if rebuild and history is not None:
        records, history = distinct_records(history).unionByName(records), None
    new = with_value(records.where(USED_SQL)).localCheckpoint()  # `value` parsed once: every frame below reads it
    new_definitions = defs.definitions(new).localCheckpoint()  # its BPMN parsed once, read three times
    every = store.put("silver_engine_definitions", _union(new_definitions, old("silver_engine_definitions")))
    waiting = new.where(kind("PROCESS_MESSAGE_SUBSCRIPTION", "CREATING") & mappable()).select(*_RECORD, "v")
    old_pending = old("silver_engine_pending")
    if old_pending is not None:
        waiting = waiting.unionByName(with_value(old_pending.where(F.col("why") != defs.RESOURCE_DELETION)
                                                 .select(*_RECORD)))
    owner_keys = waiting.select(F.col("v.elementInstanceKey").alias("key"))
    owners = _of_lake(new, history, F.col("value_type") == "PROCESS_INSTANCE", owner_keys)
    starts = _of_lake(new, history, F.col("value_type") == MSES).localCheckpoint()  # few; read three times
    names, pairs = defs.start_events(starts), store.put("engine_start_pairs", start_pairs(starts))
    store.put("engine_run_start_pairs", start_pairs(new))
    store.put("engine_correlated", correlated(new))
    changed = (new_definitions.select(_DEFINITION)
               .unionByName(new.where(kind(MSES, "CREATED")).select(F.col("v.processDefinitionKey").alias(_DEFINITION))))
    changed_deployments = defs.deployments(every.join(changed, _DEFINITION, "left_semi"), names).localCheckpoint()
    found = defs.subscriptions(waiting, every, owners).localCheckpoint()  # read twice: opened, pending
    pending = defs.pending(found).unionByName(defs.deletions(new))
    if old_pending is not None:
        pending = pending.unionByName(old_pending.where(F.col("why") == defs.RESOURCE_DELETION))
    pending = store.put("silver_engine_pending", pending)
    appended = named(defs.opened(found).unionByName(ends(new)), pairs).localCheckpoint()
    new_messages = messages(new)
    _count(run, new_messages, appended, new_definitions, pending, changed_deployments)
    return Mapped(new_messages, appended.unionByName(defs.deployed_events(changed_deployments)), appended,
                  defs.deployments(every, names))


def _of_lake(new: DataFrame, history: DataFrame | None, which: Column, keys: DataFrame | None = None) -> DataFrame:
    """The lake's records of `which` (`with_value`): the run's (`new`) and bronze's before it
    (`history`), of these only those whose `key` is one of `keys` if given."""
    found = new.where(which)
    if history is None:
        return found
    before = distinct_records(history).where(which & F.expr(USED_SQL))
    if keys is not None:
        before = before.join(keys.distinct(), "key", "left_semi")
    return found.unionByName(with_value(before))


def _count(run: StagedRun, new_messages: DataFrame, appended: DataFrame, new_definitions: DataFrame,
           pending: DataFrame, changed_deployments: DataFrame) -> None:
    """The run's counts and last mapped time, in one job."""
    frames = {"messages": (new_messages, "published_at"), "events": (appended, "timestamp"),
              "definitions": (new_definitions, "deployed_at"), "pending": (pending, None),
              "deployments": (changed_deployments, None)}
    tagged = [frame.select(F.lit(tag).alias("tag"), (F.unix_millis(time) if time else F.lit(None).cast("long")).alias("t"))
              for tag, (frame, time) in frames.items()]
    union = tagged[0]
    for frame in tagged[1:]:
        union = union.unionByName(frame)
    counts = {r["tag"]: r for r in union.groupBy("tag").agg(F.count("*").alias("n"), F.max("t").alias("t")).collect()}
    n = {tag: counts[tag]["n"] if tag in counts else 0 for tag in frames}
    result = run.result
    result.unmapped, result.deployments = n["pending"], n["deployments"]
    result.new_messages, result.new_workflow_events = n["messages"], n["events"]
    result.mapped = n["messages"] + n["events"] + n["definitions"]
    result.count_mapped_time(max((counts[t]["t"] for t in ("messages", "events", "definitions")
                                  if t in counts and counts[t]["t"] is not None), default=None))


def _union(new: DataFrame, old: DataFrame | None) -> DataFrame:
    return new if old is None else old.select(*new.columns).unionByName(new)
