"""Exporter records (contract revision 4, *Zeebe exporter records*) mapped onto the canonical
streams: pure DataFrame -> DataFrame functions over rows of bronze/engine_records' columns.
A record's `value` is read with `from_json` and an explicit schema of the fields the mapping
needs (keys as BIGINT, exact)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from correlake.config import DEFAULT_TENANT
from correlake.contract.schemas import B, I, L, S, struct
from correlake.semantics.start_events import start_instance_key_sql

# the fields of a record's `value` the mapping and the audit read
VALUE = struct(
    ("tenantId", S), ("bpmnProcessId", S), ("version", I), ("processDefinitionKey", L), ("resource", S),
    ("name", S), ("correlationKey", S), ("messageId", S), ("timeToLive", L), ("variables", S),
    ("processInstanceKey", L), ("elementInstanceKey", L), ("elementId", S), ("messageName", S),
    ("interrupting", B), ("bpmnElementType", S), ("messageKey", L),
)
MSES = "MESSAGE_START_EVENT_SUBSCRIPTION"
EVENT = "EVENT"


def with_value(records: DataFrame) -> DataFrame:
    """`records` with their `value` read as the struct column `v` (VALUE)."""
    return records.withColumn("v", F.from_json("value", VALUE))


def tenant(column: Column) -> Column:
    """A record's `tenantId` as a tenant: missing, null or "" (engines before 8.3) is the default."""
    return F.when(column.isNull() | (column == ""), F.lit(DEFAULT_TENANT)).otherwise(column)


def started_instance(bpmn_process_id: str, message_key: str) -> Column:
    """correlake's name of the instance a message starts (rule 20), over the SQL expressions given."""
    return F.expr(start_instance_key_sql(bpmn_process_id, message_key))


def start_pairs(records: DataFrame) -> DataFrame:
    """The message-start pairing: of exporter records (bronze/engine_records' columns; give
    distinct records), the `MESSAGE_START_EVENT_SUBSCRIPTION` `CORRELATED` events, one row per
    engine instance key they pair with a message: `engine_key` BIGINT (`processInstanceKey`),
    `process_instance_key` STRING (correlake's name, `msg-start:{bpmnProcessId}:{messageKey}`)."""
    pairs = (with_value(records)
             .where((F.col("record_type") == EVENT) & (F.col("value_type") == MSES) & (F.col("intent") == "CORRELATED"))
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
