"""Exporter records (contract revision 4, *Zeebe exporter records*) mapped onto the canonical
streams: pure DataFrame -> DataFrame functions over rows of bronze/engine_records' columns.
A record's `value` is read with `from_json` and an explicit schema of the fields the mapping
needs (keys as BIGINT, exact)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from correlake.contract.enums import ELEMENT_LEFT, INSTANCE_ENDED
from correlake.contract.schemas import WORKFLOW_FIELDS, B, I, L, S, T, struct
from correlake.semantics.start_events import start_instance_key_sql

# the fields of a record's `value` the mapping and the audit read
VALUE = struct(
    ("bpmnProcessId", S), ("version", I), ("processDefinitionKey", L), ("resource", S),
    ("name", S), ("correlationKey", S), ("messageId", S), ("timeToLive", L), ("variables", S),
    ("processInstanceKey", L), ("elementInstanceKey", L), ("elementId", S), ("messageName", S),
    ("interrupting", B), ("bpmnElementType", S), ("messageKey", L),
)
MSES = "MESSAGE_START_EVENT_SUBSCRIPTION"
EVENT = "EVENT"
POSITION_BITS = 50  # a mapped workflow event's position: partition_id * 2^50 + position (`event_position`)
FIELD_TYPES = dict(zip(WORKFLOW_FIELDS, (L, S, S, T, S, I, S, S, S, S, S, S, B, ArrayType(S)), strict=True))


def with_value(records: DataFrame) -> DataFrame:
    """`records` with their `value` read as the struct column `v` (VALUE)."""
    return records.withColumn("v", F.from_json("value", VALUE))


def started_instance(bpmn_process_id: str, message_key: str) -> Column:
    """correlake's name of the instance a message starts (rule 20), over the SQL expressions given."""
    return F.expr(start_instance_key_sql(bpmn_process_id, message_key))


def start_pairs(records: DataFrame) -> DataFrame:
    """The message-start pairing: of exporter records (distinct, `with_value`), the
    `MESSAGE_START_EVENT_SUBSCRIPTION` `CORRELATED` events, one row per engine instance key
    they pair with a message: `engine_key` BIGINT (`processInstanceKey`),
    `process_instance_key` STRING (correlake's name, `msg-start:{bpmnProcessId}:{messageKey}`)."""
    pairs = (records.where(kind(MSES, "CORRELATED"))
             .select(F.col("v.processInstanceKey").alias("engine_key"),
                     started_instance("v.bpmnProcessId", "v.messageKey").alias("process_instance_key"))
             .where(F.col("engine_key").isNotNull() & F.col("process_instance_key").isNotNull()))
    return pairs.groupBy("engine_key").agg(F.min("process_instance_key").alias("process_instance_key"))


def named(frame: DataFrame, pairs: DataFrame, columns: tuple[str, ...] = ("process_instance_key",
                                                                          "element_instance_key")) -> DataFrame:
    """`frame` with each of its `columns` (engine keys' digits) that `pairs` (`start_pairs`)
    pairs renamed as correlake names the instance."""
    order = frame.columns
    for column in columns:
        renames = pairs.select(F.col("engine_key").cast("string").alias(column),
                               F.col("process_instance_key").alias("_named"))
        frame = (frame.join(renames, column, "left")
                 .withColumn(column, F.coalesce("_named", column)).drop("_named"))
    return frame.select(*order)


def event_position(partition_id: str = "partition_id", position: str = "position") -> Column:
    """A mapped workflow event's position: `partition_id * 2^50 + position`, unique, stable
    across runs and ordered by (partitionId, position) for partitions below 2^13 (the
    engine's own bound: its keys hold the partition in 13 bits) and positions below 2^50
    (`MAPPABLE`)."""
    return F.col(partition_id).cast("long") * F.lit(1 << POSITION_BITS) + F.col(position)


def mappable() -> Column:
    """Whether a record's (partitionId, position) fits `event_position`."""
    return (F.col("partition_id") < F.lit(1 << 13)) & (F.col("position") < F.lit(1 << POSITION_BITS))


def kind(value_type: str, *intents: str) -> Column:
    """An EVENT record of this value type and one of `intents`."""
    return (F.col("record_type") == EVENT) & (F.col("value_type") == value_type) & F.col("intent").isin(*intents)


def _digits(column: str) -> Column:
    return F.col(column).cast("string")


def messages(records: DataFrame) -> DataFrame:
    """The `MESSAGE` `PUBLISHED` events of `records` (distinct, `with_value`) as message
    records (MESSAGE_FIELDS): position = the record's key; `messageId` "" is none."""
    return records.where(kind("MESSAGE", "PUBLISHED")).select(
        F.col("key").alias("position"), "tenant_id", F.col("v.name").alias("name"),
        F.col("v.correlationKey").alias("correlation_key"),
        F.when(F.col("v.messageId") != "", F.col("v.messageId")).alias("message_id"),
        F.col("timestamp").alias("published_at"), F.col("v.timeToLive").alias("ttl_ms"),
        F.coalesce(F.col("v.variables"), F.lit("{}")).alias("variables"))


def event_columns(type_: str, **columns: Column) -> list[Column]:
    """A mapped workflow event's columns (WORKFLOW_FIELDS), `columns` given, the rest null."""
    given = {"position": event_position(), "tenant_id": F.col("tenant_id"), "type": F.lit(type_),
             "timestamp": F.col("timestamp"), **columns}
    return [given.get(name, F.lit(None)).cast(FIELD_TYPES[name]).alias(name) for name in WORKFLOW_FIELDS]


def ends(records: DataFrame) -> DataFrame:
    """`PROCESS_INSTANCE` `ELEMENT_COMPLETED`/`ELEMENT_TERMINATED` events of `records`
    (`with_value`) as workflow events: INSTANCE_ENDED for the process itself, else ELEMENT_LEFT."""
    done = records.where(kind("PROCESS_INSTANCE", "ELEMENT_COMPLETED", "ELEMENT_TERMINATED") & mappable())
    process = F.col("v.bpmnElementType") == "PROCESS"
    ended = done.where(process).select(*event_columns(INSTANCE_ENDED, process_instance_key=_digits("key")))
    left = done.where(~process).select(*event_columns(ELEMENT_LEFT, process_instance_key=_digits("v.processInstanceKey"),
                                                element_instance_key=_digits("key")))
    return ended.unionByName(left)
