"""The outbox's new events (docs/delivery.md): what a run adds to `delivery/outbox` so that
its live events are gold's correlations, one each.

A correlation's identity is the text of the columns that say which instance a message
correlated to, and when (`IDENTITY`), computed alike from a gold row and from an event's
payload. An identity is live while the outbox holds more CORRELATED events of it than
RETRACTED ones. For the ordering keys (`contract/ordering.py`) of a run's scope, a gold
correlation that is not live gets a CORRELATED event, a live identity that gold no longer
holds a RETRACTED one. An event's ordering key is computed from its correlation (an outbox
written before revision 3 has no column for it).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from correlake.contract.ordering import ORDERING, ordering_key_column
from correlake.contract.schemas import CORRELATION, GOLD_TIMES, OUTBOX, SCOPE
from correlake.delivery.events import CORRELATED, HASH_HEX_DIGITS, RETRACTED

IDENTITY = ("tenant_id", "message_key", "bpmn_process_id", "process_version", "process_instance_key",
            "element_instance_key", "element_id", "subscription_type", "correlated_at")
TIMES = frozenset(GOLD_TIMES["correlations"])
ISO_MILLIS = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"  # the session's time zone is UTC (session.py)
NUL = "\u0000"
# a payload's first fields, then the correlation's
EVENT_FIELDS = ("event_id", "kind", "ordering_key", "sequence", "partition")


def iso(column: Column) -> Column:
    """A timestamp as the contract's text: ISO-8601 UTC with milliseconds and `Z`."""
    return F.date_format(column, ISO_MILLIS)


def _text(column: Callable[[str], Column], name: str) -> Column:
    return iso(column(name)) if name in TIMES else column(name).cast("string")


def identity(column: Callable[[str], Column]) -> Column:
    """A correlation's identity, its IDENTITY columns given by `column(name)` (a gold row's
    columns, or those of the correlation parsed from an event's payload): a JSON array of texts."""
    return F.to_json(F.array(*(_text(column, name) for name in IDENTITY)))


def partition(tenant_id: Column, ordering_key: Column, partitions: int) -> Column:
    """The ordering key's partition: the Spark twin of `delivery.events.partition_of`."""
    digest = F.sha2(F.concat(tenant_id, F.lit(NUL), ordering_key), 256)
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


def _event_id(*parts: Column) -> Column:
    return F.sha2(F.concat_ws(NUL, *parts), 256)


def outbox_events(correlations: DataFrame, history: DataFrame, run_id: str, partitions: int,
                  due_until: int | None = None) -> DataFrame:
    """The new outbox rows (OUTBOX) of the ordering keys that `correlations` (every gold
    correlation of those ordering keys) and `history` (every outbox event of them) hold.
    `due_until` (epoch millis): correlations after it are held back (not emitted yet).

    Gold rows and events go through one shuffle, by ordering key (an identity is of one
    key): per key its last sequence, per identity its events' counts and latest CORRELATED."""
    gold = correlations.select(F.lit(None).cast("string").alias("kind"), F.lit(None).cast("string").alias("event_id"),
                               F.lit(None).cast("bigint").alias("sequence"),
                               F.struct(*CORRELATION.fieldNames()).alias("c"))
    events = history.select("kind", "event_id", "sequence", parsed(F.col("payload")).alias("c"))
    same_key, same_identity = Window.partitionBy(*ORDERING), Window.partitionBy(*ORDERING, "_identity")
    is_correlated, is_retracted = ((F.col("kind") == k).cast("int") for k in (CORRELATED, RETRACTED))
    rows = (gold.unionByName(events)
            .select("*", F.col("c.tenant_id").alias("tenant_id"), F.col("c.correlation_key").alias("correlation_key"),
                    ordering_key_column(F.col("c.correlation_key"), F.col("c.message_key")).alias("ordering_key"),
                    identity(lambda n: F.col("c")[n]).alias("_identity"))
            .withColumn("_last_sequence", F.coalesce(F.max("sequence").over(same_key), F.lit(0)))
            .select("*", F.coalesce(F.sum(is_correlated).over(same_identity), F.lit(0)).alias("_generation"),
                    (F.coalesce(F.sum(is_correlated - is_retracted).over(same_identity), F.lit(0)) > 0).alias("_live"),
                    F.max(F.col("kind").isNull()).over(same_identity).alias("_in_gold"),
                    F.max(F.when(is_correlated == 1, F.col("sequence"))).over(same_identity).alias("_latest")))
    due = F.lit(True) if due_until is None else F.unix_millis(F.col("c.correlated_at")) <= F.lit(due_until)
    correlated = F.col("kind").isNull() & ~F.col("_live") & due
    retracted = (F.col("sequence") == F.col("_latest")) & F.col("_live") & ~F.col("_in_gold")
    # this run's RETRACTED events first (in the order of what they retract), then the
    # CORRELATED ones in the order of semantics' correlations
    order = Window.partitionBy(*ORDERING).orderBy(F.col("kind").isNull(), "sequence", F.col("c.correlated_at"),
                                             F.col("c.message_key"), F.col("c.bpmn_process_id"))
    new = (rows.where(correlated | retracted).select(
        F.when(correlated, F.lit(CORRELATED)).otherwise(F.lit(RETRACTED)).alias("kind"),
        F.when(correlated, _event_id(F.lit(CORRELATED), F.col("_identity"), F.col("_generation").cast("string")))
        .otherwise(_event_id(F.lit(RETRACTED), F.col("event_id"))).alias("event_id"),
        (F.col("_last_sequence") + F.row_number().over(order)).cast("bigint").alias("sequence"),
        "tenant_id", "correlation_key", "ordering_key",
        *(F.col("c")[name].alias(name) for name in ("message_key", "bpmn_process_id")), "c"))
    return (new.withColumn("partition", partition(F.col("tenant_id"), F.col("ordering_key"), partitions))
            .withColumn("payload", payload(F.col("c"))).withColumn("_run_id", F.lit(run_id))
            .select(*OUTBOX.fieldNames()))


def due_keys(correlations: DataFrame, after: int | None, until: int) -> DataFrame:
    """The keys (SCOPE) of correlations held back until a run whose cut-off was `after`
    and due at `until` (epoch millis; `after` None: since ever)."""
    at = F.unix_millis("correlated_at")
    window = at <= F.lit(until) if after is None else (at > F.lit(after)) & (at <= F.lit(until))
    return correlations.where(window).select(*SCOPE).distinct()


def due_correlations(correlations: DataFrame, keys: DataFrame, after: int | None, until: int) -> DataFrame:
    """Every correlation of the keys outside `keys` (SCOPE) whose held-back correlations fall
    due between `after` and `until` (`due_keys`): their lines are renumbered whole."""
    return correlations.join(due_keys(correlations, after, until).join(keys, SCOPE, "left_anti"), SCOPE, "left_semi")


def backfilled(gold: DataFrame, correlations: DataFrame, keys: DataFrame) -> DataFrame:
    """A first outbox's correlations: `correlations` of the `keys` (SCOPE), and gold's of every other key."""
    return gold.join(keys, SCOPE, "left_anti").unionByName(correlations)
