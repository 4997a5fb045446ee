"""The frames each gate's suites validate (pure DataFrame functions): the columns a
condition of `expectations/` reads, conditions across tables as one boolean column each.
The rules they check are the ones of `semantics/`, with its values and the contract's."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from correlake.contract.enums import CATCH, CORRELATED, EVENT_SUBPROCESS, START, SUBSCRIPTION_OPENED
from correlake.lake.sqlfiles import buffered
from correlake.semantics.order import MESSAGE_PUBLISHED
from correlake.semantics.start_events import start_instance_key_sql

FRAME_KEYS = {  # each suite's frame, and what names its rows in a failure's examples
    "bronze": ["stream", "position"], "silver": ["message_key"],
    "gold_correlations": ["message_key", "bpmn_process_id"],
    "gold_subscriptions": ["tenant_id", "element_instance_key", "message_name"],
    "gold_started_instances": ["tenant_id", "process_instance_key"]}


def bronze_frames(messages: DataFrame, events: DataFrame) -> dict[str, DataFrame]:
    """Records this run added to bronze (replays excluded), both streams in one frame."""
    m = messages.select(F.lit("messages").alias("stream"), "position", "tenant_id",
                        F.lit(MESSAGE_PUBLISHED).alias("kind"), F.col("published_at").alias("event_time"), "ttl_ms",
                        F.lit(None).cast("string").alias("element_type"),
                        F.col("correlation_key").isNotNull().alias("routing_key_ok"))
    opens = F.col("type") == SUBSCRIPTION_OPENED
    w = events.select(F.lit("workflow_events").alias("stream"), "position", "tenant_id", F.col("type").alias("kind"),
                      F.col("timestamp").alias("event_time"), F.lit(0).cast("bigint").alias("ttl_ms"), "element_type",
                      F.when(opens, F.col("correlation_key").isNotNull()).otherwise(True).alias("routing_key_ok"))
    return {"bronze": m.unionByName(w)}


def silver_frames(messages: DataFrame) -> dict[str, DataFrame]:
    """Silver messages with rule 7 checked both ways: no accepted message overlaps a buffered
    one with its id, and every rejected one names such a message."""
    accepted_with_id = F.col("duplicate_of").isNull() & F.col("message_id").isNotNull()
    w = (Window.partitionBy("tenant_id", "name", "correlation_key", "message_id")
         .orderBy("published_at", "message_key").rowsBetween(Window.unboundedPreceding, -1))
    # of the earlier accepted ones with the id, the last to leave the buffer: if any is
    # buffered at this one's publish, that one is
    last_to_leave = F.max(F.when(accepted_with_id, F.struct("deadline", "ttl_ms"))).over(w)
    overlaps = accepted_with_id & F.coalesce(
        F.expr(buffered("published_at", "_last_to_leave.ttl_ms", "_last_to_leave.deadline")), F.lit(False))
    first = messages.select(*(F.col(c).alias(f"first_{c}") for c in (
        "message_key", "tenant_id", "name", "correlation_key", "message_id", "published_at", "ttl_ms", "deadline",
        "duplicate_of")))
    rejection_ok = F.col("duplicate_of").isNull() | F.coalesce(
        F.col("first_duplicate_of").isNull()
        & (F.col("first_tenant_id") == F.col("tenant_id")) & (F.col("first_name") == F.col("name"))
        & (F.col("first_correlation_key") == F.col("correlation_key"))
        & (F.col("first_message_id") == F.col("message_id"))
        & (F.struct("first_published_at", "first_message_key") < F.struct("published_at", "message_key"))
        & F.expr(buffered("published_at", "first_ttl_ms", "first_deadline")), F.lit(False))
    deadline_ok = F.col("deadline") == F.timestamp_millis(F.unix_millis("published_at") + F.col("ttl_ms"))
    return {"silver": messages.withColumn("_last_to_leave", last_to_leave)
            .join(first, F.col("duplicate_of") == F.col("first_message_key"), "left").select(
        "message_key", "correlation_key", F.coalesce(deadline_ok, F.lit(False)).alias("deadline_ok"),
        overlaps.alias("overlaps_buffered_duplicate"), rejection_ok.alias("rejection_justified"))}


def gold_frames(tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Correlations checked against their message, and their subscription (CATCH) or started
    instance (START); subscriptions and started instances in their own frames."""
    c, m, s, i = (tables[n] for n in ("correlations", "messages", "subscriptions", "message_started_instances"))
    is_start = F.col("subscription_type") == START
    sub = s.select(*(F.col(n).alias(f"sub_{n}") for n in (
        "tenant_id", "element_instance_key", "message_name", "bpmn_process_id", "process_version",
        "process_instance_key", "element_id", "correlation_key", "opened_at", "closed_at")))
    inst = i.select(*(F.col(n).alias(f"inst_{n}") for n in (
        "tenant_id", "process_instance_key", "bpmn_process_id", "process_version", "message_key", "correlation_key",
        "started_at")))
    joined = (c.join(m.select(F.col("message_key").alias("m_key"), "ttl_ms", "published_at", "deadline",
                              "duplicate_of", F.col("variables").alias("m_variables")),
                     c.message_key == F.col("m_key"), "left")
              .join(sub, ~is_start & (c.tenant_id == F.col("sub_tenant_id"))
                    & (c.element_instance_key == F.col("sub_element_instance_key"))
                    & (c.message_name == F.col("sub_message_name")), "left")
              .join(inst, is_start & (c.tenant_id == F.col("inst_tenant_id"))
                    & (c.process_instance_key == F.col("inst_process_instance_key")), "left"))
    live = (F.col("correlated_at") == F.col("published_at")) | (  # rule 6 (and rule 22's instants)
        (F.col("correlated_at") > F.col("published_at")) & F.expr(buffered("correlated_at")))
    in_sub = F.when(is_start, True).otherwise(
        (F.col("correlated_at") >= F.col("sub_opened_at"))
        & (F.col("sub_closed_at").isNull() | (F.col("correlated_at") <= F.col("sub_closed_at"))))
    sub_fields = ("bpmn_process_id", "process_version", "process_instance_key", "element_id", "correlation_key")
    matches_sub = F.when(is_start, True).otherwise(
        F.col("sub_tenant_id").isNotNull() & _all(F.col(n).eqNullSafe(F.col(f"sub_{n}")) for n in sub_fields))
    inst_fields = ("bpmn_process_id", "process_version", "message_key", "correlation_key")
    matches_inst = F.when(~is_start, True).otherwise(
        F.col("element_instance_key").isNull() & F.col("element_id").isNull()
        & (F.col("process_instance_key") == F.expr(start_instance_key_sql("bpmn_process_id", "message_key")))
        & (F.col("correlated_at") == F.col("inst_started_at")) & _all(F.col(n) == F.col(f"inst_{n}") for n in inst_fields))
    correlations = joined.select(
        c.message_key, c.bpmn_process_id, "subscription_type",
        (F.col("published_at").isNotNull() & F.col("duplicate_of").isNull()
         & (F.col("message_published_at") == F.col("published_at"))
         & F.col("variables").eqNullSafe(F.col("m_variables"))).alias("message_accepted"),
        *(F.coalesce(v, F.lit(False)).alias(n) for n, v in (
            ("in_message_window", live), ("in_subscription_window", in_sub), ("matches_subscription", matches_sub),
            ("matches_started_instance", matches_inst))))
    return {"gold_correlations": correlations, "gold_subscriptions": _subscriptions_frame(c, s),
            "gold_started_instances": _started_instances_frame(i)}


def _subscriptions_frame(c: DataFrame, s: DataFrame) -> DataFrame:
    """Subscriptions against the correlations they took and rules 12-13: an interrupting one
    takes one message and closes CORRELATED at it, and its owner's other subscriptions
    (of an event subprocess: the scope's other event subprocesses) close by then."""
    key = ["tenant_id", "element_instance_key", "message_name"]
    taken = (c.where(F.col("subscription_type") == CATCH).groupBy(*key)
             .agg(F.count("*").alias("taken"), F.max("correlated_at").alias("last_taken_at")))
    esp = F.col("element_type") == EVENT_SUBPROCESS
    leavers = s.where(F.col("close_reason") == CORRELATED).select(
        F.col("tenant_id").alias("l_tenant_id"), F.col("element_instance_key").alias("l_owner"),
        esp.alias("l_esp"), F.col("closed_at").alias("left_at"))
    left = (s.join(leavers, (F.col("tenant_id") == F.col("l_tenant_id"))
                   & (F.col("element_instance_key") == F.col("l_owner")) & (~F.col("l_esp") | esp))
            .groupBy(*key).agg(F.min("left_at").alias("left_at")))
    correlated_close = F.col("interrupting") & (F.col("taken") >= 1) & (F.col("closed_at") == F.col("last_taken_at"))
    close_ok = (F.col("closed_at").isNull() == F.col("close_reason").isNull()) & \
        F.when(F.col("close_reason") == CORRELATED, correlated_close).otherwise(True)
    closed_with_owner = F.col("left_at").isNull() | (F.col("opened_at") > F.col("left_at")) | \
        (F.col("closed_at") <= F.col("left_at"))
    return (s.join(taken, key, "left").join(left, key, "left").withColumn("taken", F.coalesce("taken", F.lit(0)))
            .select(*key, "opened_at", "closed_at", "close_reason",
                    *(F.coalesce(v, F.lit(False)).alias(n) for n, v in (
                        ("count_matches", F.col("correlation_count") == F.col("taken")),
                        ("close_consistent", close_ok), ("closed_with_owner", closed_with_owner))),
                    (F.col("interrupting") & (F.col("taken") > 1)).alias("interrupting_overflow")))


def _started_instances_frame(i: DataFrame) -> DataFrame:
    """Started instances against the lock of rules 19 and 21: each starts once the one before
    it, for the same process and non-empty key, has ended."""
    held = (Window.partitionBy("tenant_id", "bpmn_process_id", "correlation_key")  # ended at its start: first
            .orderBy("started_at", F.col("ended_at").asc_nulls_last(), "message_key"))
    lock_ok = (F.col("correlation_key") == "") | F.coalesce(
        F.lag("ended_at").over(held) <= F.col("started_at"), F.lag("message_key").over(held).isNull())
    return i.select("tenant_id", "process_instance_key", "started_at", "ended_at", lock_ok.alias("lock_ok"))


def _all(conditions):
    """The conjunction of some column conditions."""
    return reduce(lambda a, b: a & b, conditions)
