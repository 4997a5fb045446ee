"""A driver stopped (SIGTERM, Ctrl-C) during a call: if the run it served was published
before the stop (`pipeline.run` says so on the interrupt), its caller gets the run, not
"the driver stopped"; otherwise it gets no reply, and the driver stops either way."""

from __future__ import annotations

import signal
import threading
from multiprocessing import Pipe

import pytest

from correlake.driver import server
from correlake.errors import Terminated


def _stopped(published):
    def run(spark):
        interrupt = Terminated()
        interrupt.published = published
        raise interrupt
    return run


def test_a_driver_stopped_after_a_publish_answers_with_the_run_and_stops():
    ours, caller = Pipe()
    with pytest.raises(Terminated):
        server._serve_one(ours, ("run", (), {}), None, {"run": _stopped("the published run")})
    assert caller.poll(5) and caller.recv() == (True, "the published run")


def test_a_driver_stopped_before_a_publish_stops_without_a_reply():
    ours, caller = Pipe()
    with pytest.raises(Terminated):
        server._serve_one(ours, ("run", (), {}), None, {"run": _stopped(None)})
    assert not caller.poll(0.2)


def test_a_call_whose_caller_left_is_stopped_even_when_a_finally_replaced_the_interrupt(capsys):
    """The interrupt that stops a call whose caller went away can be replaced by the error of a
    `finally` that meets the cancelled jobs (PySpark's Arrow collect): still a stopped call."""
    ours, caller = Pipe()
    signalled = threading.Event()  # the watcher's signal to stop the call, caught here rather than raised
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: signalled.set())

    def run(spark):
        caller.close()
        assert signalled.wait(30)  # the watcher saw the hang-up
        raise RuntimeError("An error occurred while calling o1.getResult")

    try:
        server._serve_one(ours, ("run", (), {}), None, {"run": run})
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert "correlake driver: the caller of run went away; its call was stopped" in capsys.readouterr().out
