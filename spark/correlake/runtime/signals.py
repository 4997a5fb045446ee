"""Interrupts: Ctrl-C and SIGTERM cancel Spark's jobs quietly, and are held while a
rollback must not be cut short."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from correlake.config import CANCEL_SECONDS
from correlake.runtime.logs import log_level


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
