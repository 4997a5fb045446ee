"""The session's JVM settings (collector, time zone, class archive, codegen cache,
stdout, the driver on loopback with no web UI, its ports asking for Spark's secret), row projections evaluated in small
runs, the in-memory store of a run's frames, writes run a few at a time that stop at
the first failure or interrupt, an interrupt that cancels the job the main thread
waits for, a run's memory collected at once or, on a driver, after its reply (an interrupt
during it delivered after it), and a waiting driver's free heap given back."""

import gc
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import weakref
from pathlib import Path

import pytest
from py4j import java_gateway
from pyspark.sql import functions as F
from support.helpers import compilations, listening_addresses

from correlake.config import INTERPRETED_MAX_BYTES, INTERPRETED_MAX_HISTORY, ConfigError, SparkSettings, validate
from correlake.lake.landing import LandingFile
from correlake.run.result import RunResult
from correlake.run.store import MemoryStore, Plan
from correlake.runtime import class_archive
from correlake.runtime.codegen import row_projections
from correlake.runtime.logs import LOG_LEVEL, log_level
from correlake.runtime.memory import (
    IDLE_HEAP_FREE_PERCENT,
    collections_deferred,
    give_back_memory,
    heap_free_ratios,
    hotspot_flags,
    release,
)
from correlake.runtime.signals import interrupt_quietly
from correlake.runtime.threads import run_concurrently


def test_driver_runs_the_throughput_collector(spark):
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert {bean.getName() for bean in beans} == {"PS Scavenge", "PS MarkSweep"}


def test_release_collects_the_jvm_s_heap_unless_a_driver_defers_it_past_its_reply(spark):
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    full = next(bean for bean in beans if bean.getName() == "PS MarkSweep")
    before = full.getCollectionCount()
    with collections_deferred():
        release(spark)
    assert full.getCollectionCount() == before
    release(spark)
    assert full.getCollectionCount() > before


def test_an_interrupt_during_release_s_collection_is_delivered_after_it_not_lost(spark):
    """SIGTERM while Python's collection runs a finalizer (py4j's make JVM calls) would be
    raised inside it, printed and lost: a driver told to stop after a reply served on."""
    class Stop(BaseException):
        pass

    class Finalized:  # in a cycle: only a collection frees it, here only release's
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, interrupt_quietly(Stop))
    gc.disable()
    try:
        cycle = Finalized()
        cycle.self = cycle
        del cycle
        with pytest.raises(Stop):
            release(spark)
    finally:
        gc.enable()
        signal.signal(signal.SIGTERM, previous)
        log_level(spark.sparkContext, LOG_LEVEL)
    assert spark.range(3).count() == 3


def test_an_interrupt_during_a_py4j_finalizer_is_raised_after_it_not_lost(spark):
    """A signal that comes while py4j's finalizer of a freed JVM object makes its call (here
    a stand-in for the JVM's side) is sent again, and raised after the finalizer: raised
    inside it, it was printed and lost, and a run, or a driver told to stop, went on."""
    class Stop(BaseException):
        pass

    class Client:  # what py4j's finalizer calls; the signal comes during the call
        address, port = "127.0.0.1", 0

        def garbage_collect_object(self, target_id):
            signal.raise_signal(signal.SIGUSR2)
            return target_id

    class Freed:
        pass

    previous = signal.signal(signal.SIGUSR2, interrupt_quietly(Stop))
    try:
        freed = Freed()
        finalizer = weakref.ref(freed, lambda _, client=Client(): java_gateway._garbage_collect_object(client, "o1"))
        with pytest.raises(Stop):
            del freed  # py4j's finalizer runs here
            assert finalizer() is None
            time.sleep(10)  # the signal, sent again, comes here
    finally:
        signal.signal(signal.SIGUSR2, previous)
        log_level(spark.sparkContext, LOG_LEVEL)
    assert spark.range(3).count() == 3


def test_a_waiting_driver_gives_its_free_heap_back_and_runs_keep_the_jvm_s_sizing(spark):
    flags = hotspot_flags(spark)
    old_generation = next(pool for pool in spark.sparkContext._jvm.java.lang.management.ManagementFactory
                          .getMemoryPoolMXBeans() if pool.getName() == "PS Old Gen")
    with heap_free_ratios(spark, 90, 100):  # a heap grown beyond what it holds, as a run leaves it
        spark.sparkContext._jvm.System.gc()
    grown = old_generation.getUsage().getCommitted()
    before, after = give_back_memory(spark)
    usage = old_generation.getUsage()
    assert after < before and usage.getCommitted() < grown
    assert usage.getCommitted() <= usage.getUsed() / (1 - IDLE_HEAP_FREE_PERCENT / 100) + 2 ** 25
    assert {name: flags.getVMOption(name).getValue() for name in ("MaxHeapFreeRatio", "MinHeapFreeRatio")} == {
        "MaxHeapFreeRatio": "100", "MinHeapFreeRatio": "0"}  # the throughput collector's: its own sizing, for runs


def test_the_jvm_keeps_utc_whatever_the_machine_s_time_zone(spark):
    """Delta replays a table's log on each commit when the JVM's time zone is not UTC."""
    jvm = spark.sparkContext._jvm
    assert jvm.java.util.TimeZone.getDefault().getID() == "UTC"
    assert jvm.java.lang.System.getProperty("user.timezone") == "UTC"


def test_the_jvm_maps_the_class_archive_the_set_up_made(spark):
    """scripts/setup.sh archives the classes a run loads (class_archive.py); the session's
    JVM maps that archive on top of the JDK's own."""
    archive = class_archive.path(SparkSettings())
    assert archive is not None and archive.exists(), "scripts/setup.sh makes it"
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    jcmd = Path(spark.sparkContext._jvm.java.lang.System.getProperty("java.home")) / "bin" / "jcmd"
    info = subprocess.run([str(jcmd), str(pid), "VM.info"], capture_output=True, text=True, check=True).stdout
    mapped = int(re.search(r"CDS archive\(s\) mapped at: .*, size (\d+)", info).group(1))
    assert mapped > archive.stat().st_size  # the JDK's archive and ours


def test_the_jvm_writes_its_stdout_to_stderr(spark):
    """What Spark or Delta print (each VACUUM's "Deleted N files…") stays out of a
    command's output, such as `correlake maintain`'s summary or `correlake sql`'s rows."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2")


def test_the_driver_listens_on_loopback_only_and_has_no_web_ui(spark):
    """Spark's driver (its RPC endpoint, block manager) and py4j listen on loopback alone:
    nothing of the JVM is reachable from the network, unless configured for a cluster."""
    listening = listening_addresses(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    assert listening and all(ip.is_loopback for ip in listening), listening
    assert spark.sparkContext.uiWebUrl is None


def rpc_failure(port: int) -> str:
    """What Spark's transport on `port` answers a request it cannot take: an RpcRequest frame
    of its wire format (length, type 3, request id, body) answered by an RpcFailure (type 5:
    request id, then the error as a length-prefixed string), its text."""
    body = b"no secret here"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock, sock.makefile("rb") as answer:
        sock.sendall(struct.pack(">qbqi", 21 + len(body), 3, 42, len(body)) + body)
        length, kind = struct.unpack(">qb", answer.read(9))
        rest = answer.read(length - 9)
    assert kind == 5, kind
    return rest[12:12 + struct.unpack(">i", rest[8:12])[0]].decode()


def test_sparks_ports_answer_only_callers_that_prove_its_secret(spark):
    """`spark.authenticate` with the executors in the driver's JVM (the kept driver's, the
    CLI's): Spark makes the secret there, written nowhere, and its RPC endpoint and block
    manager answer a caller without it by asking for its SASL handshake, where before they
    decoded what any local user sent them."""
    context = spark.sparkContext
    assert context.getConf().get("spark.authenticate") == "true"
    ports = {"RPC": int(context.getConf().get("spark.driver.port")),
             "block manager": context._jsc.sc().env().blockManager().blockManagerId().port()}
    for name, port in ports.items():
        assert rpc_failure(port).startswith("java.lang.IllegalStateException: Expected SaslMessage"), name


def test_a_broadcast_join_holds_little_of_the_driver_s_memory_until_it_is_cleaned(spark):
    """The driver's copy of a broadcast hash relation (kept until Spark's cleaner frees it)
    holds one Tungsten page at least: a small page, not Spark's 32 MB, for a join of ten rows."""
    jvm = spark.sparkContext._jvm

    def heap_used() -> int:  # live bytes: after a full collection
        jvm.System.gc()
        return jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed()

    small = spark.createDataFrame([(f"key-{i}", i) for i in range(10)], "k string, v int")
    big = spark.range(1000).selectExpr("concat('key-', CAST(id % 10 AS STRING)) AS k")
    before = heap_used()
    joined = big.join(F.broadcast(small), "k")  # its plan, and so the broadcast, kept alive
    assert joined.count() == 1000
    assert heap_used() - before < 16 * 2**20


def test_the_bind_address_is_checked(monkeypatch):
    monkeypatch.setenv("CORRELAKE_SPARK_BIND_ADDRESS", "0.0.0.0; rm")
    with pytest.raises(ConfigError, match="CORRELAKE_SPARK_BIND_ADDRESS: '0.0.0.0; rm' is not a host name"):
        validate()
    for address in ("127.0.0.1", "::1", "driver-0.spark.svc"):
        monkeypatch.setenv("CORRELAKE_SPARK_BIND_ADDRESS", address)
        validate()


def test_memory_store_checkpoints_frames_unless_told_not_to(spark):
    store = MemoryStore()
    lines = spark.range(10).withColumn("even", F.col("id") % 2 == 0)
    kept = store.put("lines", lines)
    assert kept is not lines and "LogicalRDD" in kept._jdf.queryExecution().analyzed().toString()
    evens = kept.where("even").select("id")
    assert store.put("evens", evens, checkpoint=False) is evens
    assert store.get(spark, "evens") is evens
    assert sorted(r.id for r in store.get(spark, "evens").collect()) == [0, 2, 4, 6, 8]


def test_compiled_queries_stay_cached_beyond_sparks_default_100(spark):
    queries = [spark.range(3).selectExpr(f"id * {i + 7} AS x") for i in range(120)]  # 120 distinct classes
    for query in queries:
        query.collect()
    before = compilations(spark)
    assert [r.x for r in queries[0].collect()] == [0, 7, 14]
    assert compilations(spark) == before


def test_small_runs_evaluate_their_row_projections_and_others_compile_them(spark):
    def plan(*files, rebuild=False, history=0):
        landing = [LandingFile("messages", path, size, 0, "/") for path, size in files]
        return Plan("r", landing, {}, 0.0, None, RunResult("r", rebuild=rebuild), history)

    assert plan(("a.jsonl", INTERPRETED_MAX_BYTES // 2), ("b.jsonl", INTERPRETED_MAX_BYTES // 2)).interpreted
    assert plan(("a.jsonl", 100), history=INTERPRETED_MAX_HISTORY).interpreted
    assert not plan(("a.jsonl", 100), history=INTERPRETED_MAX_HISTORY + 1).interpreted  # its MERGEs rewrite history
    assert not plan(("a.jsonl", INTERPRETED_MAX_BYTES + 1)).interpreted
    assert not plan(("a.jsonl.gz", INTERPRETED_MAX_BYTES // 5)).interpreted  # its JSON is larger than the file
    assert not plan(rebuild=True).interpreted  # every record of bronze
    key = "spark.sql.codegen.factoryMode"
    rows = spark.range(50).selectExpr("id", "named_struct('a', id, 'b', array(id, id + 1), 'c', map(id, 'x')) AS s")
    want = sorted(map(repr, rows.collect()))
    for interpreted, mode in ((True, "NO_CODEGEN"), (False, "FALLBACK")):
        with row_projections(spark, interpreted):
            assert spark.conf.get(key) == mode
            assert sorted(map(repr, rows.localCheckpoint().collect())) == want
        assert spark.conf.get(key) == "FALLBACK"


def test_concurrent_writes_not_started_are_not_started_after_a_failure_or_an_interrupt():
    """A failed write, or Ctrl-C or SIGTERM while writes run: the queued ones never start
    (the run rolls back at once instead of finishing every write first)."""
    started = []

    def failing():
        raise ValueError("disk full")

    with pytest.raises(ValueError, match="disk full"):
        run_concurrently([failing, *[lambda n=n: started.append(n) for n in range(4)]], threads=1)
    assert started == []

    def signalling():  # the signal reaches the main thread while this write runs
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR2)
        time.sleep(0.5)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR2, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_concurrently([signalling, *[lambda n=n: started.append(n) for n in range(4)]], threads=1)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert started == []
    assert run_concurrently([lambda n=n: n * n for n in range(5)], threads=2) == [0, 1, 4, 9, 16]


def test_an_interrupt_while_the_main_thread_waits_for_a_job_cancels_it_and_spark_answers_after(spark):
    """Ctrl-C, SIGTERM or a driver's caller gone while the main thread waits in a py4j call
    for a job: the job is cancelled (from another connection: a py4j connection takes one
    call at a time) and the next calls get their own answers, not the late one."""
    class Stop(BaseException):
        pass

    previous = signal.signal(signal.SIGUSR2, interrupt_quietly(Stop))
    timer = threading.Timer(1, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR2))
    try:
        timer.start()
        with pytest.raises(Stop):
            spark.range(10 ** 13).selectExpr("sum(id % 7)").collect()  # hours, uncancelled
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR2, previous)
        log_level(spark.sparkContext, LOG_LEVEL)
    deadline = time.monotonic() + 30
    while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert [spark.range(n).count() for n in (3, 5, 7)] == [3, 5, 7]
