"""The outbox's new events (docs/delivery.md): what a run adds to `delivery/outbox` so that
its live events are gold's correlations, one each.

A correlation's identity is the text of the columns that say which instance a message
correlated to, and when (`IDENTITY`), computed alike from a gold row and from an event's
payload. An identity is live while the outbox holds more CORRELATED events of it than
RETRACTED ones. For the ordering keys of a run's scope, a gold correlation that is not
live gets a CORRELATED event, a live identity that gold no longer holds a RETRACTED one.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from correlake.contract.schemas import CORRELATION, GOLD_TIMES, OUTBOX, SCOPE
from correlake.delivery.events import CORRELATED, HASH_HEX_DIGITS, RETRACTED

IDENTITY = ("tenant_id", "message_key", "bpmn_process_id", "process_version", "process_instance_key",
            "element_instance_key", "element_id", "subscription_type", "correlated_at")
TIMES = frozenset(GOLD_TIMES["correlations"])
ISO_MILLIS = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"  # the session's time zone is UTC (session.py)
NUL = "\u0000"
EVENT_FIELDS = ("event_id", "kind", "sequence", "partition")  # a payload's first fields, then the correlation's


def iso(column: Column) -> Column:
    """A timestamp as the contract's text: ISO-8601 UTC with milliseconds and `Z`."""
    return F.date_format(column, ISO_MILLIS)


def _text(column: Callable[[str], Column], name: str) -> Column:
    return iso(column(name)) if name in TIMES else column(name).cast("string")


def identity(column: Callable[[str], Column]) -> Column:
    """A correlation's identity, its IDENTITY columns given by `column(name)` (a gold row's
    columns, or those of the correlation parsed from an event's payload): a JSON array of texts."""
    return F.to_json(F.array(*(_text(column, name) for name in IDENTITY)))


def partition(tenant_id: Column, correlation_key: Column, partitions: int) -> Column:
    """The ordering key's partition: the Spark twin of `delivery.events.partition_of`."""
    digest = F.sha2(F.concat(tenant_id, F.lit(NUL), correlation_key), 256)
    return F.pmod(F.conv(F.substring(digest, 1, HASH_HEX_DIGITS), 16, 10).cast("bigint"),
                  F.lit(partitions)).cast("int")


def payload(correlation: Column) -> Column:
    """The event's JSON text: the frame's EVENT_FIELDS, then the `correlation` struct's
    columns (times as ISO text), `variables` spliced in as the JSON object it holds."""
    fields = [F.col(name) for name in EVENT_FIELDS]
    fields += [(iso(correlation[f.name]) if f.name in TIMES else correlation[f.name]).alias(f.name)
               for f in CORRELATION.fields if f.name != "variables"]
    head = F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})
    return F.concat(head.substr(F.lit(1), F.length(head) - 1), F.lit(',"variables":'),
                    F.coalesce(correlation["variables"], F.lit("null")), F.lit("}"))


def parsed(payload_text: Column) -> Column:
    """The correlation an event's payload carries (`variables`: the object's JSON text)."""
    return F.from_json(payload_text, CORRELATION)


def _by_identity(history: DataFrame) -> DataFrame:
    """Per identity of the history's events: how many CORRELATED events it has (the next
    one's generation), whether it is live, and its latest CORRELATED event."""
    events = history.select("event_id", "kind", "sequence", parsed(F.col("payload")).alias("c"))
    correlated = (F.col("kind") == CORRELATED).cast("int")
    return (events.groupBy(identity(lambda n: F.col("c")[n]).alias("_identity"))
            .agg(F.sum(correlated).alias("_generation"),
                 (2 * F.sum(correlated) > F.count("*")).alias("_live"),
                 F.max(F.when(correlated == 1, F.struct("sequence", "event_id", "c"))).alias("_last")))


def _event_id(*parts: Column) -> Column:
    return F.sha2(F.concat_ws(NUL, *parts), 256)


def outbox_events(correlations: DataFrame, history: DataFrame, run_id: str, partitions: int,
                  due_until: int | None = None) -> DataFrame:
    """The new outbox rows (OUTBOX) of the ordering keys that `correlations` (every gold
    correlation of those keys) and `history` (every outbox event of those keys) hold.
    `due_until` (epoch millis): correlations after it are held back (not emitted yet)."""
    gold = correlations.select(identity(F.col).alias("_identity"),
                               F.struct(*CORRELATION.fieldNames()).alias("_gold"))
    joined = gold.join(_by_identity(history), "_identity", "full")
    live = F.coalesce(F.col("_live"), F.lit(False))
    due = F.lit(True) if due_until is None else F.unix_millis(F.col("_gold.correlated_at")) <= F.lit(due_until)
    correlated = joined.where(F.col("_gold").isNotNull() & ~live & due).select(
        F.lit(CORRELATED).alias("kind"),
        _event_id(F.lit(CORRELATED), F.col("_identity"), F.coalesce("_generation", F.lit(0)).cast("string"))
        .alias("event_id"),
        F.col("_gold").alias("c"), F.lit(1).alias("_rank"), F.lit(None).cast("bigint").alias("_after"))
    retracted = joined.where(F.col("_gold").isNull() & live).select(
        F.lit(RETRACTED).alias("kind"), _event_id(F.lit(RETRACTED), F.col("_last.event_id")).alias("event_id"),
        F.col("_last.c").alias("c"), F.lit(0).alias("_rank"), F.col("_last.sequence").alias("_after"))
    # this run's RETRACTED events first (in the order of what they retract), then the
    # CORRELATED ones in the order of semantics' correlations
    order = Window.partitionBy(*SCOPE).orderBy("_rank", "_after", F.col("c.correlated_at"), F.col("c.message_key"),
                                               F.col("c.bpmn_process_id"))
    last = history.groupBy(*SCOPE).agg(F.max("sequence").alias("_last_sequence"))
    events = (retracted.unionByName(correlated)
              .select("*", *(F.col(f"c.{name}").alias(name) for name in SCOPE))
              .join(last, SCOPE, "left")
              .withColumn("sequence", F.coalesce("_last_sequence", F.lit(0)) + F.row_number().over(order))
              .withColumn("partition", partition(F.col("tenant_id"), F.col("correlation_key"), partitions)))
    return events.select(
        *(F.col(name) for name in ("event_id", "kind", *SCOPE)), F.col("c.message_key").alias("message_key"),
        F.col("c.bpmn_process_id").alias("bpmn_process_id"), F.col("sequence").cast("bigint").alias("sequence"),
        "partition", payload(F.col("c")).alias("payload"), F.lit(run_id).alias("_run_id"),
    ).select(*OUTBOX.fieldNames())


def due_keys(correlations: DataFrame, after: int | None, until: int) -> DataFrame:
    """The ordering keys of correlations held back until a run whose cut-off was `after`
    and due at `until` (epoch millis; `after` None: since ever)."""
    at = F.unix_millis("correlated_at")
    window = at <= F.lit(until) if after is None else (at > F.lit(after)) & (at <= F.lit(until))
    return correlations.where(window).select(*SCOPE).distinct()
