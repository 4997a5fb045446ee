"""The engine's own correlations (contract revision 4, *Engine audit*): the rows of
gold/engine_correlations from exporter records, one per (message_key, bpmn_process_id), the
first record by (partition_id, position); `sql/engine_correlations.sql` keeps the first
across runs, and the view `engine_differences` compares them with gold/correlations.
Instances are named as the mapping names them (`engine_mapping.start_pairs`, `named`)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from correlake.contract.schemas import ENGINE_CORRELATION
from correlake.transforms.engine_mapping import EVENT, named

# the CORRELATED records read, by value type: their rows' subscription_type
SUBSCRIPTION_TYPES = {"PROCESS_MESSAGE_SUBSCRIPTION": "CATCH", "MESSAGE_START_EVENT_SUBSCRIPTION": "START"}
PAIR = ["message_key", "bpmn_process_id"]  # the table's key
FIRST = ["partition_id", "position"]  # of a pair's records, the first by these is its row
INSTANCE_KEYS = ["process_instance_key", "element_instance_key"]


def correlated(records: DataFrame) -> DataFrame:
    """Every CORRELATED event of the two kinds among exporter records (distinct,
    `engine_mapping.with_value`), in gold/engine_correlations' columns, its instances the
    engine's keys' digits."""
    rows = records.where((F.col("record_type") == EVENT) & (F.col("intent") == "CORRELATED")
                         & F.col("value_type").isin(*SUBSCRIPTION_TYPES))
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


def run_rows(found: DataFrame, pairs: DataFrame, run_pairs: DataFrame,
             table: DataFrame | None) -> tuple[DataFrame, DataFrame]:
    """A run's rows for `sql/engine_correlations.sql` from its CORRELATED records `found`
    (`correlated`), and those of them that are a pair's first row, new to the table (the
    rest of `found` are a pair's later records). `pairs`: the lake's message-start pairings
    (`engine_mapping.start_pairs`), which name the instances; `run_pairs`: the run's, which
    also rename the rows of the table (gold/engine_correlations; None: none) that they name."""
    new = first_per_pair(named(found, pairs, tuple(INSTANCE_KEYS))).select(*ENGINE_CORRELATION.fieldNames())
    if table is None:
        return new, new
    rows = new.unionByName(renamed(table, run_pairs).select(*new.columns))
    return first_per_pair(rows), new.join(table.select(*PAIR), PAIR, "left_anti")
