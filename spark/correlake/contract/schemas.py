"""Table schemas. Gold schemas are the contract's, column for column."""

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from correlake.config import ENGINE_STREAM


def struct(*fields: tuple) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in fields])


S, L, I, B, T = StringType(), LongType(), IntegerType(), BooleanType(), TimestampType()  # noqa: E741 (short type names)

# Output of the line parser (one row per non-empty landing line); times in epoch millis.
PARSED = struct(
    ("stream", S), ("_source_file", S), ("_line", L), ("raw", S), ("reason", S), ("_record_hash", S),
    ("position", L), ("tenant_id", S),
    ("name", S), ("correlation_key", S), ("message_id", S), ("published_at", L), ("ttl_ms", L),
    ("variables", S),
    ("type", S), ("timestamp", L), ("bpmn_process_id", S), ("process_version", I),
    ("process_instance_key", S), ("element_instance_key", S), ("element_id", S), ("element_type", S),
    ("message_name", S), ("interrupting", B), ("message_start_events", ArrayType(S)),
    ("partition_id", I), ("key", L), ("record_type", S), ("value_type", S), ("intent", S), ("value", S),
)

MESSAGE_FIELDS = ["position", "tenant_id", "name", "correlation_key", "message_id", "published_at",
                  "ttl_ms", "variables"]
WORKFLOW_FIELDS = ["position", "tenant_id", "type", "timestamp", "bpmn_process_id", "process_version",
                   "process_instance_key", "element_instance_key", "element_id", "element_type",
                   "message_name", "correlation_key", "interrupting", "message_start_events"]
# bronze/engine_records (contract revision 4): a Zeebe exporter record's envelope, its value as JSON text, and
# the lineage columns of the other bronze tables
ENGINE_RECORD = struct(
    ("partition_id", I), ("position", L), ("key", L), ("timestamp", T), ("record_type", S), ("value_type", S),
    ("intent", S), ("tenant_id", S), ("value", S), ("raw", S), ("_record_hash", S), ("_is_replay", B),
    ("_source_file", S), ("_line", L), ("_ingested_at", T), ("_run_id", S),
)
ENGINE_FIELDS = ENGINE_RECORD.fieldNames()[:ENGINE_RECORD.fieldNames().index("raw")]
STREAM_FIELDS = {"messages": MESSAGE_FIELDS, "workflow_events": WORKFLOW_FIELDS, ENGINE_STREAM: ENGINE_FIELDS}
STREAM_TIME = {"messages": "published_at", "workflow_events": "timestamp", ENGINE_STREAM: "timestamp"}
INGESTED_FILE = (("stream", S), ("path", S), ("size", L), ("modified_at", L), ("lines", L))
INGESTED_FILES = struct(*INGESTED_FILE, ("_ingested_at", T), ("_run_id", S))
RUNS = struct(("run_id", S), ("started_at", T), ("finished_at", T), ("files", L), ("records_read", L),
              ("quarantined", L), ("max_event_time", T), ("as_of", T), ("summary", S))

CORRELATION = struct(
    ("message_key", L), ("tenant_id", S), ("message_name", S), ("correlation_key", S),
    ("bpmn_process_id", S), ("process_version", I), ("process_instance_key", S),
    ("element_instance_key", S), ("element_id", S), ("subscription_type", S),
    ("correlated_at", T), ("message_published_at", T), ("variables", S),
)
MESSAGE = struct(
    ("message_key", L), ("tenant_id", S), ("name", S), ("correlation_key", S), ("message_id", S),
    ("ttl_ms", L), ("published_at", T), ("deadline", T), ("status", S), ("duplicate_of", L),
    ("correlation_count", I), ("variables", S),
)
# gold/as_of: one row, the instant gold/messages' statuses are at (contract revision 2)
AS_OF = struct(("as_of", T), ("run_id", S))
SUBSCRIPTION = struct(
    ("tenant_id", S), ("element_instance_key", S), ("message_name", S), ("bpmn_process_id", S),
    ("process_version", I), ("process_instance_key", S), ("element_id", S), ("element_type", S),
    ("correlation_key", S), ("interrupting", B), ("opened_at", T), ("closed_at", T),
    ("close_reason", S), ("correlation_count", I),
)
STARTED_INSTANCE = struct(
    ("process_instance_key", S), ("tenant_id", S), ("bpmn_process_id", S), ("process_version", I),
    ("message_key", L), ("correlation_key", S), ("started_at", T), ("ended_at", T),
)
# gold/engine_correlations: the engine's CORRELATED records (contract revision 4, Engine audit)
ENGINE_CORRELATION = struct(
    ("tenant_id", S), ("message_key", L), ("message_name", S), ("correlation_key", S), ("bpmn_process_id", S),
    ("process_instance_key", S), ("element_instance_key", S), ("subscription_type", S), ("correlated_at", T),
    ("partition_id", I), ("position", L),
)
# silver/engine_pending (run/engine_silver.py): the exporter records of mapped kinds not mapped (yet), `why`
# as the view unmapped_engine_records gives it, with the columns to map them by in a later run
ENGINE_PENDING = struct(
    ("partition_id", I), ("position", L), ("key", L), ("timestamp", T), ("record_type", S), ("value_type", S),
    ("intent", S), ("tenant_id", S), ("value", S), ("process_definition_key", L), ("element_id", S), ("why", S),
)
# Delivery (contract revision 2, docs/delivery.md). `payload` is the event's JSON text.
OUTBOX = struct(
    ("event_id", S), ("kind", S), ("tenant_id", S), ("correlation_key", S), ("ordering_key", S),
    ("message_key", L), ("bpmn_process_id", S), ("sequence", L), ("partition", I), ("payload", S), ("_run_id", S),
)
DELIVERY_STATE = struct(
    ("event_id", S), ("status", S), ("attempts", I), ("next_attempt_at", T), ("last_error", S), ("updated_at", T),
)
DELIVERY_ATTEMPT = struct(("event_id", S), ("attempt", I), ("at", T), ("outcome", S), ("detail", S))
GOLD = {
    "correlations": CORRELATION,
    "messages": MESSAGE,
    "subscriptions": SUBSCRIPTION,
    "message_started_instances": STARTED_INSTANCE,
}
# Primary keys of the gold tables (MERGE conditions).
GOLD_KEYS = {
    "correlations": ["message_key", "bpmn_process_id"],
    "messages": ["message_key"],
    "subscriptions": ["tenant_id", "element_instance_key", "message_name"],
    "message_started_instances": ["process_instance_key", "tenant_id"],
}
# The unit of partitioning and of restating rows: a run recomputes whole keys.
SCOPE = ["tenant_id", "correlation_key"]
KEY_GROUPS = struct(("tenant_id", S), ("correlation_key", S), ("label", S))
# a run's touched keys: their key group and where it is replayed from (null: its first record)
TOUCHED = struct(("tenant_id", S), ("correlation_key", S), ("label", S), ("since", T))
GOLD_TIMES = {name: [f.name for f in schema.fields if f.dataType == T] for name, schema in GOLD.items()}


def with_millis(schema: StructType) -> StructType:
    """The same schema with TIMESTAMP columns as epoch-millis BIGINT (engine output)."""
    return StructType([StructField(f.name, L if f.dataType == T else f.dataType, True) for f in schema.fields])


def as_timestamps(df, schema: StructType):
    """`df`, a frame of `with_millis(schema)`'s columns, as a frame of `schema`."""
    from pyspark.sql import functions as F

    return df.select(*[F.timestamp_millis(f.name).alias(f.name) if f.dataType == T else F.col(f.name)
                       for f in schema.fields])


ENGINE_OUT = StructType([
    StructField("correlation", with_millis(CORRELATION), True),
    StructField("subscription", with_millis(SUBSCRIPTION), True),
    StructField("instance", with_millis(STARTED_INSTANCE), True),
])
