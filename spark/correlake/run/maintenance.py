"""Lake maintenance: compaction, deletion-vector purge, VACUUM and a log checkpoint per table,
and the log's retention (LOG_RETAIN_HOURS) set on each; the gates' validations (results and
Data Docs pages) past VACUUM's retention removed.
The contract's tables of lakes written before 2026-11-25 lose their deletion-vector table
feature (`DROP FEATURE`), so that readers without it can read them (see DELETION_VECTOR_TABLES).

Maintenance rewrites files, never rows: every table reads the same before and after. Gold's
tables whose rows a later run can change (`lake/live.py`) are rewritten so that each file holds
only such rows or only rows no run changes without late input: an hour's MERGEs then rewrite
the few live files, not the history's.
It holds the lake's run lock (never beside a run) and first rolls back an unfinished
run, as a run does. VACUUM keeps Delta's retention (7 days, time travel within it keeps
working) unless `retain_hours` is given: an explicit value is the user's override of
Delta's retention check, lifted for this maintenance only (`correlake maintain` asks for
`--force` below 7 days, the Airflow DAG refuses it: `preflight.check_retention`). A
table none of whose files is older than the retention is not vacuumed: VACUUM would
delete nothing there.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from correlake.config import (
    DELETION_VECTOR_TABLES,
    DELIVERY_RETAIN_DAYS,
    DELTA_RETAIN_HOURS,
    LOG_RETAIN_HOURS,
    MAINTAINED_FILE_ROWS,
    TABLES,
    WRITE_THREADS,
    table_path,
)
from correlake.delivery import retention
from correlake.lake import as_of, deltars, files, journal, lock
from correlake.lake import tables as lake
from correlake.lake.live import LIVE_ROWS, is_live
from correlake.lake.sqlfiles import delta_table
from correlake.quality.gx import old_validations, remove_validations
from correlake.runtime.threads import run_concurrently

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"  # a table's own VACUUM retention
LOG_RETENTION = ("delta.logRetentionDuration", f"interval {LOG_RETAIN_HOURS:g} hours")  # what maintenance sets
# The operations of the commits maintenance makes (Delta's names): none changes a row.
# The second line: the commits of `DROP FEATURE deletionVectors`.
OPERATIONS = frozenset({"OPTIMIZE", "REORG", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                        "UNSET TBLPROPERTIES", "Deletion Vector Tombstones", "Empty Commit", "DROP FEATURE"})
SPLIT = "correlake maintain: live rows apart, no row changed"  # the userMetadata of `_split`'s commits


@dataclass
class TableReport:
    table: str
    files: list = field(default_factory=list)      # active data files (Delta snapshot): before, after
    bytes: list = field(default_factory=list)      # their size
    on_disk: list = field(default_factory=list)    # data and deletion-vector files in the folder
    log_files: list = field(default_factory=list)  # files in _delta_log
    compacted: int = 0        # files rewritten by OPTIMIZE, REORG and the live rows' split
    written: int = 0          # files they wrote
    purged_dvs: int = 0       # deletion vectors folded into rewritten files
    vacuumed: int = 0         # files VACUUM deleted (dry run: would delete)
    dropped_feature: bool = False  # the deletion-vector feature dropped (dry run: would be)
    log_retention_set: bool = False  # LOG_RETENTION set, the table had another (dry run: would be)
    seconds: float = 0.0


@dataclass
class Maintenance:
    lake: str
    retain_hours: float | None
    dry_run: bool
    rolled_back: str | None = None   # id of the unfinished run rolled back first
    pending_run: bool = False        # dry run: an unfinished run would be rolled back
    tables: list[TableReport] = field(default_factory=list)
    validations: int = 0             # gate validations removed, results and pages (dry run: would remove)
    delivery_attempts: int | None = None  # delivery/attempts rows past DELIVERY_RETAIN_DAYS removed (None: busy)
    seconds: float = 0.0


def maintain(spark: SparkSession, lake_dir: str, retain_hours: float | None = None, dry_run: bool = False,
             wait_seconds: float = 0.0) -> Maintenance:
    """Compact, purge, vacuum and checkpoint every table of the lake, and remove the gates'
    validations past the retention (dry run: only report)."""
    start = time.perf_counter()
    result = Maintenance(lake_dir, retain_hours, dry_run)
    with lock.run_lock(lake_dir, wait_seconds):
        if dry_run:
            result.pending_run = journal.has_journal(lake_dir)
        else:
            result.rolled_back = journal.rollback(lake_dir)
        names = [name for name in TABLES if lake.is_table(table_path(lake_dir, name))]
        with _retention_check_lifted(spark, retain_hours is not None):
            result.tables = run_concurrently([lambda n=name: _table(spark, lake_dir, n, retain_hours, dry_run)
                                              for name in names])
        if not dry_run:  # readers of published versions (delivery) read the compacted ones
            journal.mark_published(lake_dir)
        validations = old_validations(lake_dir, DELTA_RETAIN_HOURS if retain_hours is None else retain_hours)
        result.validations = len(validations)
        if not dry_run:
            remove_validations(lake_dir, validations)
        result.delivery_attempts = retention.prune(lake_dir, DELIVERY_RETAIN_DAYS, dry_run)
    result.seconds = round(time.perf_counter() - start, 2)
    return result


def only_maintained(spark: SparkSession, path: str, version: int) -> bool:
    """Whether maintenance made every commit of the table after `version` (its rows are
    those of `version`); False if there was no table at `version`."""
    if version < 0:
        return False
    history = spark.sql(f"DESCRIBE HISTORY {delta_table(path)}").where(f"version > {version}")
    return all(r["operation"] in OPERATIONS or r["userMetadata"] == SPLIT
               for r in history.select("operation", "userMetadata").collect())


@contextmanager
def _retention_check_lifted(spark: SparkSession, lifted: bool):
    """Delta's retention check off for this maintenance only, when the user chose the retention."""
    before = spark.conf.get(RETENTION_CHECK, "true")
    if lifted:
        spark.conf.set(RETENTION_CHECK, "false")
    try:
        yield
    finally:
        spark.conf.set(RETENTION_CHECK, before)


def _table(spark: SparkSession, lake_dir: str, name: str, retain_hours: float | None, dry_run: bool) -> TableReport:
    start, path = time.perf_counter(), table_path(lake_dir, name)
    report = TableReport(TABLES[name])
    detail = _measure(lake_dir, name, report)
    retain = "" if retain_hours is None else f" RETAIN {retain_hours:g} HOURS"
    has_dvs = "deletionVectors" in detail.features
    report.dropped_feature = has_dvs and name not in DELETION_VECTOR_TABLES
    report.log_retention_set = (RETENTION_PROPERTY not in detail.properties  # Delta: the log's ≥ the files'
                                and detail.properties.get(LOG_RETENTION[0]) != LOG_RETENTION[1])
    if dry_run:
        if _vacuum_due(path, detail, retain_hours):
            report.vacuumed = spark.sql(f"VACUUM {delta_table(path)}{retain} DRY RUN").count()
    else:
        if report.log_retention_set:
            spark.sql(f"ALTER TABLE {delta_table(path)} SET TBLPROPERTIES ('{LOG_RETENTION[0]}' = '{LOG_RETENTION[1]}')")
        if detail.files > 1 and name not in LIVE_ROWS:  # one file or none: nothing to compact
            _rewrite(spark, f"OPTIMIZE {delta_table(path)}", report)
        if has_dvs:  # what OPTIMIZE left: single files with few deletes
            _rewrite(spark, f"REORG TABLE {delta_table(path)} APPLY (PURGE)", report)
        if name in LIVE_ROWS and detail.files:
            _split(spark, lake_dir, name, as_of.current(lake_dir), report)
        if report.dropped_feature:  # reader version 1 again (Delta keeps a checkpoint for older versions)
            spark.sql(f"ALTER TABLE {delta_table(path)} DROP FEATURE deletionVectors")
        if _vacuum_due(path, detail, retain_hours):
            files_before_vacuum = _files(path)[0]
            spark.sql(f"VACUUM {delta_table(path)}{retain}")
            report.vacuumed = files_before_vacuum - _files(path)[0]
        _checkpoint(spark, path)
        _measure(lake_dir, name, report)
    report.seconds = round(time.perf_counter() - start, 2)
    return report


def _measure(lake_dir: str, name: str, report: TableReport) -> deltars.Detail:
    """Add the table's files and bytes (active, on disk, in its log) to `report`; its detail."""
    detail = deltars.detail(lake_dir, name)
    on_disk, log_files = _files(table_path(lake_dir, name))
    report.files.append(detail.files)
    report.bytes.append(detail.bytes)
    report.on_disk.append(on_disk)
    report.log_files.append(log_files)
    return detail


def _vacuum_due(path: str, detail: deltars.Detail, retain_hours: float | None) -> bool:
    """Whether VACUUM may delete anything: it deletes no file written within the retention,
    so a table whose every file (its log aside) is younger is not vacuumed — a Spark query
    of several jobs and two commits saved. A table with a retention of its own is."""
    if retain_hours is None and RETENTION_PROPERTY in detail.properties:
        return True
    hours = DELTA_RETAIN_HOURS if retain_hours is None else retain_hours
    return files.holds_older(path, time.time() - hours * 3600, "_delta_log")


def _rewrite(spark: SparkSession, statement: str, report: TableReport) -> None:
    metrics = spark.sql(statement).first()["metrics"]
    report.compacted += metrics["numFilesRemoved"]
    report.written += metrics["numFilesAdded"]
    if metrics["deletionVectorStats"] is not None:
        report.purged_dvs += metrics["deletionVectorStats"]["numDeletionVectorsRemoved"]


def _split(spark: SparkSession, lake_dir: str, name: str, at: int | None, report: TableReport) -> None:
    """Compact the table into files that each hold only its live rows at `at` or only the others (of
    at most MAINTAINED_FILE_ROWS rows), unless it is so already: no file holds both, and
    neither kind is in more than one file that has room."""
    flag, path = is_live(name, at), table_path(lake_dir, name)
    table = spark.read.format("delta").load(path)
    held = table.groupBy(F.input_file_name()).agg(F.min(flag).alias("first"), F.max(flag).alias("last"),
                                                  F.count("*").alias("rows")).collect()
    roomy = [r["first"] for r in held if r["first"] == r["last"] and r["rows"] < MAINTAINED_FILE_ROWS]
    if all(r["first"] == r["last"] for r in held) and len(roomy) == len(set(roomy)):
        return
    (table.repartitionByRange(2, flag).write.format("delta").mode("overwrite").option("dataChange", "false")
     .option("maxRecordsPerFile", MAINTAINED_FILE_ROWS).option("userMetadata", SPLIT).save(path))
    report.compacted += len(held)
    report.written += int(deltars.table(lake_dir, name).history(1)[0]["operationMetrics"]["numFiles"])


def _files(path: str) -> tuple[int, int]:
    """(data and deletion-vector files, _delta_log files) on disk; checksum files not counted."""
    data = log = 0
    for folder, _dirs, names in os.walk(path):
        count = sum(1 for n in names if not n.startswith("."))
        if os.path.relpath(folder, path).split(os.sep)[0] == "_delta_log":
            log += count
        else:
            data += count
    return data, log


def _checkpoint(spark: SparkSession, path: str) -> None:
    """A Delta checkpoint of the latest version: readers replay the log from it."""
    jvm = spark._jvm
    none = jvm.scala.Option.empty()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    delta_log.checkpoint(delta_log.update(False, none, none), none)


def summary(result: Maintenance) -> str:
    """One line per table: active files, size, files on disk, log files, what was done, time."""
    retain = (f"{DELTA_RETAIN_HOURS} h (Delta's default)" if result.retain_hours is None
              else f"{result.retain_hours:g} h (explicit; Delta's retention check lifted)")
    head = [f"correlake maintain {'(dry run) ' if result.dry_run else ''}{result.lake} — VACUUM retention {retain}"]
    if result.rolled_back:
        head.append(f"rolled back the unfinished run {result.rolled_back} first")
    if result.pending_run:
        head.append("an unfinished run is pending: maintenance would roll it back first")
    if result.retain_hours is not None and result.retain_hours < DELTA_RETAIN_HOURS:
        head.append(f"warning: versions older than {result.retain_hours:g} h can no longer be read (time travel)")

    def arrow(values, scale=1):
        return " → ".join(f"{v / scale:.2f}" if scale != 1 else str(v) for v in values)

    vacuum = "would vacuum" if result.dry_run else "vacuumed"
    rows = [f"{'table':<34}{'active files':>14}{'MB':>16}{'files on disk':>16}{'log files':>12}"
            f"{'compacted':>11}{'DVs purged':>12}{vacuum:>14}{'s':>8}"]
    for t in result.tables:
        rows.append(f"{t.table:<34}{arrow(t.files):>14}{arrow(t.bytes, 1 << 20):>16}{arrow(t.on_disk):>16}"
                    f"{arrow(t.log_files):>12}{t.compacted:>11}{t.purged_dvs:>12}{t.vacuumed:>14}{t.seconds:>8}")
    if reset := [t.table for t in result.tables if t.log_retention_set]:
        rows.append(f"log retention {'would be' if result.dry_run else 'was'} set to {LOG_RETAIN_HOURS:g} h "
                    f"(delta.logRetentionDuration) on {len(reset)} tables: older versions cannot be read (time travel)")
    if dropped := [t.table for t in result.tables if t.dropped_feature]:
        rows.append(f"deletion vectors {'would be' if result.dry_run else 'were'} dropped as a table feature from "
                    f"{', '.join(dropped)}: readers without it (delta-rs's to_pandas) read them")
    docs = (f"gates: {'would remove' if result.dry_run else 'removed'} {result.validations} validations past the "
            "retention, with their Data Docs pages (each suite's latest kept)")
    delivery = ("delivery: a pass holds the delivery lock: its tables are left for the next maintenance"
                if result.delivery_attempts is None else
                f"delivery: {'would remove' if result.dry_run else 'removed'} {result.delivery_attempts} attempts of "
                f"events final for over {DELIVERY_RETAIN_DAYS} days"
                + ("" if result.dry_run else "; delivery/state and delivery/attempts compacted"))
    total = f"total {result.seconds} s (tables are maintained {WRITE_THREADS} at a time: their seconds overlap)"
    return "\n".join(head + rows + [docs, delivery, total])
