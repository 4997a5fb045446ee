"""A call that meets the kept driver as it stops (idle) starts another instead of failing.

A stopping driver removes its key, then its socket file, then stops listening; a
caller that finds it listening without its key waits for it to be gone, then starts
the next driver (`launch.serves_calls`, `kept.start`). The driver here is a
stand-in that listens as `correlake serve` does: the call path is what is tested."""

from __future__ import annotations

import socket
import threading
import time
from multiprocessing.connection import Listener
from types import SimpleNamespace

from correlake.driver import client, kept, protocol


def test_a_call_that_meets_the_kept_driver_stopping_waits_for_it_then_starts_another(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRELAKE_HOME", str(tmp_path))
    monkeypatch.setenv("CORRELAKE_KEEP_DRIVER", "7200")
    address = kept.address()
    stopping = socket.socket(socket.AF_UNIX)  # a driver whose `serve` has removed its key, not yet its socket
    stopping.bind(str(address))
    stopping.listen()

    def stop() -> None:  # the rest of its `finally`, a moment later
        time.sleep(0.5)
        address.unlink()
        stopping.close()

    started = []

    def spawn(sock, log, **options):  # `correlake serve`: a new key, then it listens and takes a call
        assert not protocol.serving(sock), "a driver was started while the stopping one still listened"
        listener = Listener(str(sock), family="AF_UNIX", authkey=protocol.new_secret(protocol.key_path(sock)))
        threading.Thread(target=lambda: listener.accept().close(), daemon=True).start()
        started.append(listener)
        return SimpleNamespace(pid=0)

    monkeypatch.setattr(kept, "spawn", spawn)
    stopper = threading.Thread(target=stop)
    stopper.start()
    try:
        with client._connect_kept() as conn:  # before: DriverError, "cannot call the kept driver"
            assert not conn.closed
    finally:
        stopper.join()
        for listener in started:
            listener.close()
    assert len(started) == 1
