"""The engine's own correlations (contract revision 4, *Engine audit*): the rows of
gold/engine_correlations from exporter records, one per (message_key, bpmn_process_id), the
first record by (partition_id, position); `sql/engine_correlations.sql` keeps the first
across runs, and the view `engine_differences` compares them with gold/correlations.
Instances are named as the mapping names them (`engine_mapping.start_pairs`, `named`)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from correlake.contract.schemas import ENGINE_CORRELATION
from correlake.transforms.engine_mapping import EVENT, named, start_pairs, with_value

# the CORRELATED records read, by value type: their rows' subscription_type
SUBSCRIPTION_TYPES = {"PROCESS_MESSAGE_SUBSCRIPTION": "CATCH", "MESSAGE_START_EVENT_SUBSCRIPTION": "START"}
PAIR = ["message_key", "bpmn_process_id"]  # the table's key
FIRST = ["partition_id", "position"]  # of a pair's records, the first by these is its row
INSTANCE_KEYS = ["process_instance_key", "element_instance_key"]


def correlated(records: DataFrame) -> DataFrame:
    """Every CORRELATED event of the two kinds among bronze/engine_records rows (exact
    replays left out), in gold/engine_correlations' columns, its instances the engine's
    keys' digits."""
    rows = with_value(records.where(~F.col("_is_replay") & (F.col("record_type") == EVENT)
                                    & (F.col("intent") == "CORRELATED") & F.col("value_type").isin(*SUBSCRIPTION_TYPES)))
    kind = F.create_map(*(F.lit(x) for pair in SUBSCRIPTION_TYPES.items() for x in pair))[F.col("value_type")]
    return rows.select(
        "tenant_id", F.col("v.messageKey").alias("message_key"), F.col("v.messageName").alias("message_name"),
        F.col("v.correlationKey").alias("correlation_key"), F.col("v.bpmnProcessId").alias("bpmn_process_id"),
        F.col("v.processInstanceKey").cast("string").alias("process_instance_key"),
        F.when(kind == "CATCH", F.col("v.elementInstanceKey").cast("string")).alias("element_instance_key"),
        kind.alias("subscription_type"), F.col("timestamp").alias("correlated_at"), "partition_id", "position")


def first_per_pair(rows: DataFrame) -> DataFrame:
    """Of `rows`, the first by (partition_id, position) of each (message_key, bpmn_process_id)."""
    order = Window.partitionBy(*PAIR).orderBy(*FIRST)
    return rows.withColumn("_n", F.row_number().over(order)).where("_n = 1").drop("_n")


def renamed(table: DataFrame, pairs: DataFrame) -> DataFrame:
    """The rows of gold/engine_correlations (`table`) that `pairs` rename: those of an earlier
    run that named an instance by its engine key before its pairing came."""
    keys = pairs.select(F.col("engine_key").cast("string").alias("_key"))
    touched = table.join(keys, F.col("_key").isin(*(F.col(c) for c in INSTANCE_KEYS)), "left_semi")
    return named(touched, pairs, tuple(INSTANCE_KEYS))


def run_rows(records: DataFrame, history: DataFrame | None, table: DataFrame | None) -> tuple[DataFrame, int]:
    """A run's rows for `sql/engine_correlations.sql` from its bronze/engine_records rows
    `records` (bronze's `history` before it, gold/engine_correlations' rows `table`; None:
    none), and how many of its CORRELATED records are not a row (a pair's later record).
    Instances are named by the pairings of `records` and `history`; those of `records` also
    rename the table's rows that they name."""
    distinct = records.where(~F.col("_is_replay"))
    pairs = start_pairs(distinct if history is None else distinct.unionByName(history.where(~F.col("_is_replay"))))
    found = correlated(records).localCheckpoint()
    new = first_per_pair(named(found, pairs, tuple(INSTANCE_KEYS))).select(*ENGINE_CORRELATION.fieldNames())
    if table is None:
        new = new.localCheckpoint()
        return new, found.count() - new.count()
    fresh = new.join(table.select(*PAIR), PAIR, "left_anti").count()
    rows = new.unionByName(renamed(table, start_pairs(distinct)).select(*new.columns))
    return first_per_pair(rows).localCheckpoint(), found.count() - fresh
