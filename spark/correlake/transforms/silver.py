"""Silver: distinct records in engine-ready shape, message uniqueness (rule 7)
and the deployments (rule 18)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.contract.enums import PROCESS_DEPLOYED
from correlake.contract.schemas import MESSAGE_FIELDS, L, S, T, struct
from correlake.semantics.uniqueness import dedup_messages
from correlake.transforms.sequential import sequential_pass

SILVER_MESSAGE = struct(
    ("message_key", L), ("tenant_id", S), ("name", S), ("correlation_key", S), ("message_id", S),
    ("published_at", T), ("ttl_ms", L), ("deadline", T), ("variables", S), ("duplicate_of", L),
)
_DEDUP_IN = [c for c in MESSAGE_FIELDS if c != "variables"]
_DEDUP_OUT = struct(("position", L), ("duplicate_of", L))
_DEDUP_ORDER = ["published_at", "position"]  # rule 7's order within a key (millis, then position)


def distinct_records(bronze: DataFrame) -> DataFrame:
    """Bronze without replays: one row per record (position) of the stream."""
    return bronze.where(~F.col("_is_replay"))


def millis(column: str):
    return F.unix_millis(F.col(column))


def pair_key(first: str, second: str):
    """One text per pair of non-null string columns, distinct for distinct pairs: `first`'s
    length leads (a separator could also occur in the values: "a␀b"+"c" and "a"+"b␀c")."""
    return F.concat(F.length(first).cast("string"), F.lit(":"), F.col(first), F.col(second))


def accepted_messages(messages: DataFrame, sequential: Callable = sequential_pass) -> DataFrame:
    """Silver messages: every distinct message with `duplicate_of` (null when accepted).

    `messages`: distinct bronze messages, covering whole (tenant_id, correlation_key)s;
    `sequential`: what runs rule 7's pass over each key's rows (`sequential_pass`'s
    signature: in Spark's workers, or in the driver process for the driver backend).
    """
    shaped = messages.select(*[millis(c).alias(c) if c == "published_at" else F.col(c) for c in _DEDUP_IN])
    shaped = shaped.withColumn("_key", pair_key("tenant_id", "correlation_key"))

    def per_key(_, rows):
        for position, duplicate_of in dedup_messages(rows):
            yield {"position": position, "duplicate_of": duplicate_of}

    with_ids = shaped.where(F.col("message_id").isNotNull())
    verdicts = sequential(with_ids, "_key", _DEDUP_ORDER, _DEDUP_OUT, per_key)
    return (messages.join(verdicts, "position", "left")
            .select(F.col("position").alias("message_key"), "tenant_id", "name", "correlation_key",
                    "message_id", "published_at", "ttl_ms",
                    F.timestamp_millis(millis("published_at") + F.col("ttl_ms")).alias("deadline"),
                    "variables", "duplicate_of"))


def workflow_events(events: DataFrame) -> DataFrame:
    """Silver workflow events: distinct records, bronze bookkeeping dropped."""
    return events.drop("raw", "_record_hash", "_is_replay", "_source_file", "_line", "_ingested_at", "_run_id")


DEPLOYMENT_COLUMNS = ["tenant_id", "bpmn_process_id", "process_version", "message_start_events", "deployed_at",
                      "position"]


def deployed(events: DataFrame) -> DataFrame:
    """The PROCESS_DEPLOYED records among `events`, as deployment rows (silver/deployments).
    Which one counts at each point of the order (rule 18) is the engine's `Deployments`."""
    return (events.where(F.col("type") == PROCESS_DEPLOYED)
            .select(*DEPLOYMENT_COLUMNS[:-2], F.col("timestamp").alias("deployed_at"), "position"))


def deployments(new: DataFrame, old: DataFrame | None) -> DataFrame:
    """Every deployment: `old` rows (silver/deployments; of older lakes, their columns only)
    and `new` ones."""
    return new if old is None else old.select(*DEPLOYMENT_COLUMNS).unionByName(new)
