"""Process definitions of exporter records and what they map: each definition's BPMN parsed
once into silver/engine_definitions (in Python workers), the deployments they make, and the
subscriptions they open — or why one cannot open yet (silver/engine_pending, the view
`unmapped_engine_records`). Frames `with_value` (`engine_mapping.py`)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, MapType

from correlake.contract.bpmn import BpmnRefused, element_types
from correlake.contract.enums import ELEMENT_TYPES, PROCESS_DEPLOYED, SUBSCRIPTION_OPENED
from correlake.contract.records import READS_INTERRUPTING
from correlake.contract.schemas import ENGINE_PENDING, I, L, S, T, struct
from correlake.transforms.engine_mapping import MSES, event_columns, event_position, kind, mappable

# why a record of a mapped kind takes no part (yet): the view unmapped_engine_records
NO_DEFINITION, NO_ELEMENT, UNSUPPORTED_ELEMENT, RESOURCE_DELETION = (
    "NO_DEFINITION", "NO_ELEMENT", "UNSUPPORTED_ELEMENT", "RESOURCE_DELETION")
_PARSED = struct(("process_definition_key", L), ("elements", ArrayType(struct(("id", S), ("type", S)))),
                 ("refused", S))
# silver/engine_definitions: a definition's element id -> type (`bpmn.element_types`), or why its BPMN was refused
DEFINITIONS = struct(("process_definition_key", L), ("tenant_id", S), ("bpmn_process_id", S), ("process_version", I),
                     ("deployed_at", T), ("position", L), ("elements", MapType(S, S)), ("refused", S))


def _parse(batches):
    """Element types of each definition's resource (Python workers: one parse per definition)."""
    schema = to_arrow_schema(_PARSED)
    for batch in batches:
        rows = []
        for key, resource in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            try:
                elements = [{"id": i, "type": t} for i, t in element_types(resource or "").items()]
                rows.append({"process_definition_key": key, "elements": elements, "refused": None})
            except BpmnRefused as exc:
                rows.append({"process_definition_key": key, "elements": [], "refused": str(exc)})
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def definitions(records: DataFrame) -> DataFrame:
    """The `PROCESS` `CREATED` events of `records` as rows of silver/engine_definitions."""
    created = records.where(kind("PROCESS", "CREATED") & mappable())
    key = F.col("v.processDefinitionKey").alias("process_definition_key")
    parsed = created.select(key, F.col("v.resource")).mapInArrow(_parse, _PARSED)
    return (created.select(key, "tenant_id", F.col("v.bpmnProcessId").alias("bpmn_process_id"),
                           F.col("v.version").alias("process_version"), F.col("timestamp").alias("deployed_at"),
                           event_position().alias("position"))
            .join(parsed.withColumn("elements", F.map_from_entries("elements")), "process_definition_key")
            .select(*DEFINITIONS.fieldNames()))


def start_events(records: DataFrame) -> DataFrame:
    """(process_definition_key, message_start_events) of the `MESSAGE_START_EVENT_SUBSCRIPTION`
    `CREATED` events of `records`: each definition's start event names, sorted."""
    return (records.where(kind(MSES, "CREATED"))
            .groupBy(F.col("v.processDefinitionKey").alias("process_definition_key"))
            .agg(F.array_sort(F.collect_set("v.messageName")).alias("message_start_events")))


def deployments(every: DataFrame, names: DataFrame) -> DataFrame:
    """silver/deployments' rows of the definitions `every` with their start events `names`
    (`start_events`; none: `[]`), one per definition."""
    none = F.array().cast(ArrayType(S))
    return (every.join(names, "process_definition_key", "left")
            .select("tenant_id", "bpmn_process_id", "process_version",
                    F.coalesce("message_start_events", none).alias("message_start_events"), "deployed_at", "position"))


def deployed_events(deployments_: DataFrame) -> DataFrame:
    """Deployment rows as PROCESS_DEPLOYED workflow events (what silver's scope reads)."""
    columns = {name: F.col(name) for name in ("position", "bpmn_process_id", "process_version", "message_start_events")}
    return deployments_.withColumn("timestamp", F.col("deployed_at")).select(*event_columns(PROCESS_DEPLOYED, **columns))


def _named_definition() -> Column:
    """The definition a subscription's record names (null or negative: none; older brokers)."""
    key = F.col("v.processDefinitionKey")
    return F.when(key >= 0, key)


def subscriptions(candidates: DataFrame, every: DataFrame, owners: DataFrame) -> DataFrame:
    """`candidates` (`PROCESS_MESSAGE_SUBSCRIPTION` `CREATING` records, new and pending,
    `with_value`) with their definition and `why` one cannot open (null: it opens; `opened`,
    `pending`): its definition the one its record names, without falling back, else its
    owner's (`owners`: `PROCESS_INSTANCE` records of the lake, `with_value`, the first by
    (partition_id, position) of its `key`); `every`: the lake's definitions. Its element's
    type from that definition's BPMN."""
    wanted = candidates.select(F.col("v.elementInstanceKey").alias("key")).distinct()
    owner = (owners.join(wanted, "key", "left_semi").groupBy(F.col("key").alias("_owner"))
             .agg(F.min_by("v.processDefinitionKey", F.struct("partition_id", "position")).alias("_owner_definition")))
    found = (candidates.withColumn("_owner", F.col("v.elementInstanceKey"))
             .join(owner, "_owner", "left")
             .withColumn("process_definition_key", F.coalesce(_named_definition(), "_owner_definition"))
             .join(every.select("process_definition_key", F.col("process_version").alias("_version"),
                                "elements", "refused"), "process_definition_key", "left")
             .withColumn("_type", F.col("elements")[F.col("v.elementId")]))
    why = (F.when(F.col("elements").isNull(), F.lit(NO_DEFINITION))
           .when(F.col("refused").isNotNull(), F.lit(UNSUPPORTED_ELEMENT))  # a BPMN refused: none of its elements read
           .when(F.col("_type").isNull(), F.lit(NO_ELEMENT))
           .when(~F.col("_type").isin(*ELEMENT_TYPES), F.lit(UNSUPPORTED_ELEMENT)))
    return found.withColumn("why", why)


def opened(found: DataFrame) -> DataFrame:
    """The SUBSCRIPTION_OPENED events of `subscriptions`' rows."""
    interrupting = F.when(F.col("_type").isin(*READS_INTERRUPTING), F.coalesce("v.interrupting", F.lit(True))) \
        .otherwise(F.lit(True))
    return found.where(F.col("why").isNull()).select(*event_columns(
        SUBSCRIPTION_OPENED, bpmn_process_id=F.col("v.bpmnProcessId"), process_version=F.col("_version"),
        process_instance_key=F.col("v.processInstanceKey").cast("string"),
        element_instance_key=F.col("v.elementInstanceKey").cast("string"), element_id=F.col("v.elementId"),
        element_type=F.col("_type"), message_name=F.col("v.messageName"),
        correlation_key=F.col("v.correlationKey"), interrupting=interrupting))


def pending(rows: DataFrame) -> DataFrame:
    """`rows` (`with_value`, a `why` and `process_definition_key`) that have a `why`, as rows
    of silver/engine_pending."""
    return rows.where(F.col("why").isNotNull()).select(
        *[F.col("v.elementId").alias(name) if name == "element_id" else F.col(name) for name in ENGINE_PENDING.fieldNames()])


def deletions(records: DataFrame) -> DataFrame:
    """The `PROCESS` `DELETED` events of `records` (`with_value`) as pending rows (never mapped)."""
    return pending(records.where(kind("PROCESS", "DELETED")).withColumn("why", F.lit(RESOURCE_DELETION))
                   .withColumn("process_definition_key", F.col("v.processDefinitionKey")))
