"""The one SparkSession factory: Delta from local JARs, no network at start, the driver
on loopback (CORRELAKE_SPARK_BIND_ADDRESS) and no web UI; on a cluster, this package
and the JARs sent to the executors (docs/cluster.md)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from correlake.config import S3Settings, SparkSettings, state_dir
from correlake.errors import SetupError
from correlake.runtime import class_archive
from correlake.runtime.jars import delta_jars, s3_jars
from correlake.runtime.logs import LOG_CONFIG, LOG_LEVEL, log_level
from correlake.runtime.signals import interrupt_quietly


def get_spark(settings: SparkSettings | None = None, dump_classes_to: Path | None = None):
    """Return the active SparkSession, creating it with Delta enabled if needed (its JVM
    writing its class archive to `dump_classes_to` as it exits: `driver/archive.build`)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    settings = settings or SparkSettings()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    jars, s3 = delta_jars(settings), s3_jars(settings)
    conf = {
        "spark.jars": ",".join(jars),
        # also on the driver's system class path: JVM threads serving Python threads see Delta
        "spark.driver.extraClassPath": os.pathsep.join(jars + s3),
        # the S3 JARs by path on each node: through spark.jars each executor copies them at its start
        **({"spark.executor.extraClassPath": os.pathsep.join(s3)} if s3 else {}),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        # int64 microseconds, not INT96, which delta-rs wraps outside 1677-2262 (the lake holds years 1 to 9999)
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # created at start; by default an empty folder in the working directory
        "spark.sql.warehouse.dir": str(state_dir() / "spark-warehouse"),
        # nothing of the driver reachable from the network unless configured (a cluster)
        "spark.driver.bindAddress": settings.bind_address,
        "spark.driver.host": settings.bind_address,
        # Spark's own ports answer only callers that prove a secret, made here and written nowhere (docs/cluster.md)
        **({"spark.authenticate": "true"} if in_one_jvm(settings.master) else {}),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        # a broadcast join's hash relation holds a page at least until the cleaner frees it (performance.md)
        "spark.buffer.pageSize": "2m",
        "spark.sql.maxPlanStringLength": "8192",  # long plans: explain strings cost minutes otherwise
        # a run's generated classes outnumber Spark's default 100 (performance.md)
        "spark.sql.codegen.cache.maxEntries": "2000",
        # a stage's number varies from run to run: without it in the name, the cached class serves them all
        "spark.sql.codegen.useIdInClassName": "false",
        # the throughput collector (G1's concurrent marking takes a core), its heap resized after a
        # System.gc() too (`memory.give_back_memory`); the JVM in UTC, where Delta skips replaying a
        # commit's log; the class archive's classes mapped, not loaded (performance.md)
        "spark.driver.extraJavaOptions": " ".join([
            f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-XX:+UseParallelGC", "-XX:+UseAdaptiveSizePolicyWithSystemGC",
            "-Duser.timezone=UTC",
            *class_archive.java_options(settings, dump_classes_to)]),
    }
    conf.update(settings.extra_conf)
    builder = SparkSession.builder.master(settings.master).appName("correlake")
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        # the JVM's stdout and stderr, inherited: what Spark or Delta print stays out of our output,
        # and the module system's notice of Spark's incubator module out of the console
        with _jvm_output():
            spark = builder.getOrCreate()
        spark._jsparkSession.sessionState()  # made on first use: it checks the SQL settings
    except Exception as exc:  # the JVM did not start (it said why above), or refused a setting
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        why = next((line.removeprefix("Caused by: ") for line in reversed(lines) if line.startswith("Caused by:")),
                   lines[0])
        raise SetupError(f"Spark did not start with these settings (CORRELAKE_SPARK_MASTER, CORRELAKE_DRIVER_MEMORY, "
                         f"CORRELAKE_SPARK_BIND_ADDRESS, CORRELAKE_SPARK_CONF): {why}") from None
    log_level(spark.sparkContext, LOG_LEVEL)
    use_object_store(spark)
    ship_package(spark.sparkContext)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, interrupt_quietly(KeyboardInterrupt))  # in place of PySpark's
    return spark


def use_object_store(spark, settings: S3Settings | None = None) -> None:
    """hadoop-aws's settings for the S3 endpoint (`hadoop_conf`) in a live session's
    Hadoop configuration, which Spark and Delta copy for each file system they open and
    each task. Hadoop keeps the s3a file system of a bucket once opened: set them before."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_conf(settings).items():
        hadoop.set(key, value)


def hadoop_conf(settings: S3Settings | None = None) -> dict[str, str]:
    """hadoop-aws's settings (Spark's `spark.hadoop.` ones without the prefix) for the endpoint."""
    settings = settings or S3Settings()
    conf = {"fs.s3a.endpoint.region": settings.region}
    if settings.endpoint:  # a server of one's own (MinIO, Ceph, a test's): path-style requests
        conf |= {"fs.s3a.endpoint": settings.endpoint, "fs.s3a.path.style.access": "true",
                 "fs.s3a.connection.ssl.enabled": str(urlsplit(settings.endpoint).scheme == "https").lower()}
    return conf


def in_one_jvm(master: str) -> bool:
    """Whether `master` runs the executors in the driver's JVM (`local`, `local[N]`; not `local-cluster`)."""
    return master.startswith("local") and not master.startswith("local-cluster")


def ship_package(context) -> None:
    """On a cluster (any master but `local…`), send this package to the executors, whose
    Python workers import it (the mapInArrow passes, parsing, the engine): a zip of it,
    made in the session's temporary folder (removed when its JVM stops) and served by
    the driver (`addPyFile`). The executors need Python and the dependencies only; the
    Delta JARs reach them the same way (`spark.jars`)."""
    if in_one_jvm(context.master):
        return
    package = Path(__file__).parents[1]
    archive = Path(context._temp_dir) / "correlake.zip"  # PySpark's own folder of the session
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(package.parent))
    context.addPyFile(str(archive))


JVM_NOTICES = (b"WARNING: Using incubator modules:",)  # what a JVM says of Spark's own options, not ours to show


@contextmanager
def _jvm_output():
    """A child process started within the block (the JVM) writes its stdout and its stderr
    to a pipe whose lines a thread passes on to this process's stderr, but JVM_NOTICES.
    (Delta prints each VACUUM's "Deleted N files…" line to the JVM's stdout, where it
    would precede a command's output or corrupt its piped rows.) The thread ends with the
    pipe's last writer, the JVM."""
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    threading.Thread(target=_pass_on, args=(read, os.dup(2)), name="correlake-jvm-output", daemon=True).start()
    saved = os.dup(1), os.dup(2)
    os.dup2(write, 1)
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)


def _pass_on(read: int, out: int) -> None:
    with os.fdopen(read, "rb") as lines, os.fdopen(out, "wb", buffering=0) as err:
        for line in lines:
            if not line.startswith(JVM_NOTICES):
                err.write(line)
