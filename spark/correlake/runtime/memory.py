"""The driver JVM's memory between runs: what a finished run held freed, and the heap's
free space given back while a driver waits."""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

from correlake.runtime.logs import LOG_LEVEL, log_level
from correlake.runtime.signals import interrupts_held

IDLE_HEAP_FREE_PERCENT = 10  # of the old generation, once a driver has given back its memory


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
    replied to its caller (`driver/server.py`)."""
    _collections_deferred.set()
    try:
        yield
    finally:
        _collections_deferred.clear()
