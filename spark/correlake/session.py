"""The one SparkSession factory: Delta from local JARs, no network at start, the driver
on loopback (CORRELAKE_SPARK_BIND_ADDRESS) and no web UI; on a cluster, this package
and the JARs sent to the executors (docs/cluster.md)."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from correlake import class_archive
from correlake.config import CANCEL_SECONDS, WRITE_THREADS, S3Settings, SparkSettings, state_dir
from correlake.lake import objectstore

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
LOG_LEVEL = "ERROR"
IDLE_HEAP_FREE_PERCENT = 10  # of the old generation, once a driver has given back its memory


class SetupError(RuntimeError):
    """The environment is not ready (missing JARs, Java)."""


def delta_jars(settings: SparkSettings) -> list[str]:
    jars = sorted(str(p) for p in settings.jars_dir.glob("*.jar"))
    if not any("delta-spark" in j for j in jars):
        raise SetupError(
            f"Delta JARs not found in {settings.jars_dir}; run scripts/setup.sh "
            "(or set CORRELAKE_JARS)"
        )
    return jars


def s3_jars(settings: SparkSettings) -> list[str]:
    """The JARs of `s3a://` (hadoop-aws, the AWS SDK bundle: scripts/setup.sh --s3), if fetched."""
    return sorted(str(p) for p in settings.s3_jars_dir.glob("*.jar"))


def get_spark(settings: SparkSettings | None = None, dump_classes_to: Path | None = None):
    """Return the active SparkSession, creating it with Delta enabled if needed (its JVM
    writing its class archive to `dump_classes_to` as it exits: `class_archive.build`)."""
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
        # The S3 JARs (660 MB) by path, on each node: through spark.jars, even as `local:`,
        # each executor (local mode's too) copies them into its folder at each start.
        **({"spark.executor.extraClassPath": os.pathsep.join(s3)} if s3 else {}),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        # Parquet's int64 microseconds, not Spark's default INT96 (nanoseconds, which other
        # readers, delta-rs among them, wrap outside 1677-2262; the lake holds years 1 to 9999)
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Spark creates this folder at start; by default it would be an empty one in the working directory
        "spark.sql.warehouse.dir": str(state_dir() / "spark-warehouse"),
        # nothing of the driver reachable from the network unless configured (a cluster)
        "spark.driver.bindAddress": settings.bind_address,
        "spark.driver.host": settings.bind_address,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        "spark.sql.maxPlanStringLength": "8192",  # long plans: explain strings cost minutes otherwise
        # A run compiles ~700 distinct classes; with Spark's 100 they are compiled again and again.
        "spark.sql.codegen.cache.maxEntries": "2000",
        # Generated classes named without their stage's number, which varies from one run of
        # the same query to the next: the cached class serves them all.
        "spark.sql.codegen.useIdInClassName": "false",
        # The throughput collector: a run's checkpointed frames keep much of the heap live,
        # on which G1 would mark concurrently all the time, on one of few cores.
        # Its heap resized after a System.gc() too (`release`, `give_back_memory`), as after any full collection.
        # The JVM's own time zone UTC, as the session's: in any other, Delta checks each
        # commit's file list by replaying the table's log (`allFilesInCrc` verification).
        # The classes of the set-up's archive mapped, not loaded (`class_archive.py`).
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
        with _stdout_to_stderr():  # the JVM's stdout, inherited: what Spark or Delta print stays out of our output
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
    """hadoop-aws's settings for the S3 endpoint (objectstore.hadoop_conf) in a live session's
    Hadoop configuration, which Spark and Delta copy for each file system they open and
    each task. Hadoop keeps the s3a file system of a bucket once opened: set them before."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in objectstore.hadoop_conf(settings).items():
        hadoop.set(key, value)


def ship_package(context) -> None:
    """On a cluster (any master but `local…`), send this package to the executors, whose
    Python workers import it (the mapInArrow passes, parsing, the engine): a zip of it,
    made in the session's temporary folder (removed when its JVM stops) and served by
    the driver (`addPyFile`). The executors need Python and the dependencies only; the
    Delta JARs reach them the same way (`spark.jars`)."""
    if context.master.startswith("local") and not context.master.startswith("local-cluster"):
        return
    package = Path(__file__).parent
    archive = Path(context._temp_dir) / "correlake.zip"  # PySpark's own folder of the session
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(package.parent))
    context.addPyFile(str(archive))


@contextmanager
def _stdout_to_stderr():
    """File descriptor 1 is stderr's within the block: a child process started there
    writes its stdout to stderr. (Delta prints each VACUUM's "Deleted N files…" line to
    the JVM's stdout, where it would precede a command's output or corrupt its piped rows.)"""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def log_level(context, level: str) -> None:
    """Every logger of Spark's JVM at `level` (`SparkContext.setLogLevel` sets the root's only)."""
    log4j = context._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setAllLevels("", log4j.Level.toLevel(level))


def interrupt_quietly(interrupt: type[BaseException]):
    """A signal handler: cancel Spark's jobs, without the errors their cancellation would
    log (the run rolls back; `release` turns logging on again), and raise `interrupt`.

    The signal may come while the main thread waits for the JVM's answer to a call, and a
    py4j connection takes one call at a time: the jobs are cancelled from another thread,
    on its own connection, and the main thread's connection, whose answer would come too
    late, is closed (its next call opens a new one).

    A signal that comes while py4j's finalizer of a freed JVM object makes its call is
    sent again until it comes after the finalizer: raised inside it, Python would print it
    and drop it (a finalizer's errors go nowhere), and the run, or a driver, would go on."""
    def handler(signum, frame):
        from pyspark import SparkContext

        if _in_py4j_finalizer(frame):  # sent again shortly, until it comes after the finalizer
            again = threading.Timer(0.01, signal.pthread_kill, (threading.main_thread().ident, signum))
            again.daemon = True
            again.start()
            return
        if (context := SparkContext._active_spark_context) is not None:
            canceller = threading.Thread(target=_cancel_jobs, args=(context,), daemon=True)
            canceller.start()
            canceller.join(CANCEL_SECONDS)
            _close_thread_connection(context)
        raise interrupt()
    return handler


_PY4J_FINALIZERS = ("_garbage_collect_object", "_garbage_collect_connection")  # py4j.java_gateway's


def _in_py4j_finalizer(frame) -> bool:
    """Whether the interrupted `frame` is within a py4j finalizer."""
    while frame is not None:
        if frame.f_code.co_name in _PY4J_FINALIZERS and frame.f_globals.get("__name__") == "py4j.java_gateway":
            return True
        frame = frame.f_back
    return False


def _cancel_jobs(context) -> None:
    try:
        log_level(context, "OFF")
        context.cancelAllJobs()
    except Exception:  # the JVM is stopping too (the signal went to the process group)
        pass


def _close_thread_connection(context) -> None:
    """Close this thread's py4j connection (pinned-thread mode, PySpark's default)."""
    thread_connection = getattr(context._gateway._gateway_client, "get_thread_connection", None)
    if thread_connection is not None and (connection := thread_connection()) is not None:
        connection.close()


INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)  # SIGUSR1: the driver's caller is gone


@contextmanager
def interrupts_held():
    """Hold interrupts until the block is done, then deliver them: a rollback is not
    stopped halfway by a second Ctrl-C or SIGTERM (outside the main thread: as they come)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    handlers = {s: h for s in INTERRUPTS if (h := signal.getsignal(s)) is not None}  # None: not set from Python
    for number in handlers:
        signal.signal(number, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(held):
            signal.raise_signal(number)


_collections_deferred = threading.Event()


def release(spark) -> None:
    """Free what a finished run checkpointed and shuffled, for the next run in this process;
    log as before if an interrupt stopped it.

    Spark's cleaner removes the blocks and shuffle files of RDDs the JVM has garbage
    collected, which by itself may wait for its periodic GC (30 min). Python drops its
    references first, so that the JVM's objects become unreachable. Within
    `collections_deferred`, the collections (about 1 s) are left to the driver, which
    makes them after its reply.

    The collections hold interrupts: Python's runs py4j's finalizers, each a call to the
    JVM, and an interrupt raised inside a finalizer is printed and lost (a driver told
    to stop would serve on).
    """
    log_level(spark.sparkContext, LOG_LEVEL)
    if not _collections_deferred.is_set():
        with interrupts_held():
            gc.collect()
            spark.sparkContext._jvm.System.gc()


def hotspot_flags(spark):
    """HotSpot's diagnostic MXBean of the session's JVM: its flags, read and (the manageable ones) set."""
    jvm = spark.sparkContext._jvm
    return jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))


@contextmanager
def heap_free_ratios(spark, minimum: int, maximum: int):
    """The JVM's MinHeapFreeRatio and MaxHeapFreeRatio (the old generation's free share a full
    collection sizes it to) set within the block, then as they were."""
    flags = hotspot_flags(spark)
    ratios = {name: flags.getVMOption(name).getValue() for name in ("MinHeapFreeRatio", "MaxHeapFreeRatio")}

    def set_ratios(low, high) -> None:  # the minimum never above the maximum, at each step
        flags.setVMOption("MinHeapFreeRatio", "0")
        flags.setVMOption("MaxHeapFreeRatio", str(high))
        flags.setVMOption("MinHeapFreeRatio", str(low))

    set_ratios(minimum, maximum)
    try:
        yield
    finally:
        set_ratios(ratios["MinHeapFreeRatio"], ratios["MaxHeapFreeRatio"])


def give_back_memory(spark) -> tuple[int, int]:
    """Give the heap's free space back to the system, for a driver that waits: a full
    collection with the old generation's free share capped at IDLE_HEAP_FREE_PERCENT,
    then the ratios as they were, so that runs size the heap as before. The heap's
    committed bytes (before, after)."""
    heap = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
    before = heap.getHeapMemoryUsage().getCommitted()
    with heap_free_ratios(spark, 0, IDLE_HEAP_FREE_PERCENT):
        gc.collect()
        spark.sparkContext._jvm.System.gc()
    return before, heap.getHeapMemoryUsage().getCommitted()


@contextmanager
def collections_deferred():
    """`release` only logs as before within the block: a driver collects after it has
    replied to its caller (`run/driver.py`)."""
    _collections_deferred.set()
    try:
        yield
    finally:
        _collections_deferred.clear()


@contextmanager
def row_projections(spark, interpreted: bool):
    """Spark's row projections evaluated rather than compiled within the block, if `interpreted`.

    Outside whole-stage code, each task makes its own projections (the code that copies,
    serializes and deserializes rows), and Spark generates their source again for each
    one: only the compiled classes are cached. On a small run that takes a fifth of the
    JVM's time, more than evaluating them saves; a run of many rows gains from the
    compiled code. (`spark.sql.codegen.factoryMode`, an internal setting; Spark's own
    tests run its expressions both ways.)"""
    key = "spark.sql.codegen.factoryMode"
    before = spark.conf.get(key)
    spark.conf.set(key, "NO_CODEGEN" if interpreted else before)
    try:
        yield
    finally:
        spark.conf.set(key, before)


class _NotStarted(Exception):
    """A task of `run_concurrently` left out: an earlier one failed, or the caller was interrupted."""


def run_concurrently(tasks: list, threads: int = WRITE_THREADS) -> list:
    """Call each of `tasks` (Spark actions) on a few threads; their results, in order.
    After a failure or an interrupt, the tasks not started yet are not started."""
    stop = threading.Event()

    def guarded(task):
        if stop.is_set():
            raise _NotStarted
        try:
            return task()
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(guarded, task) for task in tasks]
        try:
            return [future.result() for future in futures]  # the first failure comes before what it left out
        except BaseException:
            stop.set()
            raise
