"""The engine's own correlations (contract revision 4, *Engine audit*): the rows of
gold/engine_correlations from exporter records, one per (message_key, bpmn_process_id), the
first record by (partition_id, position); `sql/engine_correlations.sql` keeps the first
across runs, and the view `engine_differences` compares them with gold/correlations."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from correlake.contract.schemas import ENGINE_CORRELATION
from correlake.transforms.engine_mapping import start_pairs

# the CORRELATED records read, by value type: their rows' subscription_type
SUBSCRIPTION_TYPES = {"PROCESS_MESSAGE_SUBSCRIPTION": "CATCH", "MESSAGE_START_EVENT_SUBSCRIPTION": "START"}
PAIR = ["message_key", "bpmn_process_id"]  # the table's key
FIRST = ["partition_id", "position"]  # of a pair's records, the first by these is its row
_VALUE = StructType([StructField(name, kind) for name, kind in (
    ("messageKey", LongType()), ("messageName", StringType()), ("correlationKey", StringType()),
    ("bpmnProcessId", StringType()), ("processInstanceKey", LongType()), ("elementInstanceKey", LongType()))])


def correlated(records: DataFrame) -> DataFrame:
    """Every CORRELATED event of the two kinds among bronze/engine_records rows (exact
    replays left out), in gold/engine_correlations' columns and `_engine_key`, the engine's
    key of the instance (named by `named`)."""
    rows = records.where(~F.col("_is_replay") & (F.col("record_type") == "EVENT") & (F.col("intent") == "CORRELATED")
                         & F.col("value_type").isin(*SUBSCRIPTION_TYPES))
    value = F.from_json("value", _VALUE)
    kind = F.create_map(*(F.lit(x) for pair in SUBSCRIPTION_TYPES.items() for x in pair))[F.col("value_type")]
    return rows.select(
        "tenant_id", value["messageKey"].alias("message_key"), value["messageName"].alias("message_name"),
        value["correlationKey"].alias("correlation_key"), value["bpmnProcessId"].alias("bpmn_process_id"),
        F.lit(None).cast("string").alias("process_instance_key"),
        F.when(kind == "CATCH", value["elementInstanceKey"].cast("string")).alias("element_instance_key"),
        kind.alias("subscription_type"), F.col("timestamp").alias("correlated_at"), "partition_id", "position",
        value["processInstanceKey"].alias("_engine_key"))


def named(rows: DataFrame, pairs: DataFrame) -> DataFrame:
    """`rows` (of `correlated`) with each instance named as correlake names it: the instance
    of a START by its pairing (`engine_mapping.start_pairs`, whose rows `pairs` are), as is a
    CATCH's that a pairing names; any other CATCH's by its engine key's digits."""
    by_key = (pairs.select(F.col("engine_key").alias("_engine_key"), F.col("process_instance_key").alias("_name"))
              .dropDuplicates(["_engine_key"]))
    name = F.coalesce("_name", F.when(F.col("subscription_type") == "CATCH", F.col("_engine_key").cast("string")))
    return (rows.join(by_key, "_engine_key", "left").withColumn("process_instance_key", name)
            .select(*ENGINE_CORRELATION.fieldNames()))


def first_per_pair(rows: DataFrame) -> DataFrame:
    """Of `rows`, the first by (partition_id, position) of each (message_key, bpmn_process_id)."""
    order = Window.partitionBy(*PAIR).orderBy(*FIRST)
    return rows.withColumn("_n", F.row_number().over(order)).where("_n = 1").drop("_n")


def engine_correlations(records: DataFrame, history: DataFrame | None = None) -> DataFrame:
    """The rows that `records` (bronze/engine_records rows) give gold/engine_correlations, one
    per pair, named with the pairings of `records` and of the lake's bronze `history` (None:
    none), so a CATCH is named whatever run brought its pairing."""
    rows = correlated(records)
    every = records if history is None else records.unionByName(history)
    return first_per_pair(named(rows, start_pairs(every)))


def renamed(table: DataFrame, records: DataFrame) -> DataFrame:
    """The rows of gold/engine_correlations (`table`) that the pairings of `records` rename: a
    CATCH that an earlier run kept under its engine key, whose pairing came later."""
    pairs = start_pairs(records).select(F.col("engine_key").cast("string").alias("process_instance_key"),
                                        F.col("process_instance_key").alias("_name"))
    return (table.where(F.col("subscription_type") == "CATCH").join(pairs, "process_instance_key")
            .withColumn("process_instance_key", F.col("_name")).select(*ENGINE_CORRELATION.fieldNames()))


def run_rows(records: DataFrame, history: DataFrame | None, table: DataFrame | None) -> tuple[DataFrame, int]:
    """A run's rows for `sql/engine_correlations.sql` from its bronze/engine_records rows
    `records` (bronze's `history` before it, gold/engine_correlations' rows `table`; None:
    none), and how many of its CORRELATED records are not a row (a pair's later record)."""
    new = engine_correlations(records, history).localCheckpoint()
    read = correlated(records).count()
    if table is None:
        return new, read - new.count()
    fresh = new.join(table.select(*PAIR), PAIR, "left_anti").count()
    return first_per_pair(new.unionByName(renamed(table, records))), read - fresh
