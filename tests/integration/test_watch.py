"""`correlake watch` (contract: *Continuous runs*) as a user runs it: a process of its own
with a webhook sink, fed landing files while it runs. Each batch is run and delivered
(every event once, in order per ordering key), a batch whose gate fails is not run again
until a new file comes and then runs with it, SIGTERM ends it after the step in progress
with exit 0, and a watch killed mid-run and started again loses and doubles nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.delivery_helpers import Receiver, not_in_sequence
from support.helpers import write_landing

from correlake.config import table_path
from correlake.lake.lock import lock_path

EVERY = 1.0
DEADLINE = 300.0  # seconds a batch may take from landing to delivered on a loaded machine


def batch(n: int, keys: int = 3) -> tuple[list, list]:
    """Batch `n`: for each of two tenants and `keys` correlation keys shared by both, a
    waiting receive task and the message it takes (one correlation each)."""
    at, messages, events = 1_700_000_000_000 + n * 3_600_000, [], []
    for t, tenant in enumerate(("acme", "globex")):
        for k in range(keys):
            position = n * 1000 + t * 100 + k
            events.append({"position": position, "type": "SUBSCRIPTION_OPENED", "timestamp": at + k,
                           "tenant_id": tenant, "bpmn_process_id": "p", "process_instance_key": f"i{position}",
                           "element_instance_key": f"e{position}", "element_type": "RECEIVE_TASK",
                           "message_name": "paid", "correlation_key": f"order-{k}"})
            messages.append({"position": position, "tenant_id": tenant, "name": "paid",
                             "correlation_key": f"order-{k}", "published_at": at + 1000 + k})
    return messages, events


class Watcher:
    """A `correlake watch` child process; its output lines as they come."""

    def __init__(self, landing: Path, lake: Path, receiver: Receiver, *options: str):
        command = [str(Path(sys.executable).with_name("correlake")), "watch", "--landing", str(landing),
                   "--lake", str(lake), "--every", str(EVERY), "--sink", "webhook", "--url", receiver.url,
                   "--retry-base", "0.01", "--retry-cap", "0.05", *options]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, "CORRELAKE_KEEP_DRIVER": "0"})
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.process.stdout.readline, "")),
                                       daemon=True)
        self.reader.start()

    def until(self, condition, what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not condition():
            assert self.process.poll() is None, f"watch ended while waiting for {what}:\n{''.join(self.lines)}"
            assert time.monotonic() < deadline, f"no {what} in {DEADLINE} s:\n{''.join(self.lines)}"
            time.sleep(0.2)

    def text(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def test_watch_runs_delivers_retries_a_failed_gate_survives_a_kill_and_stops_on_sigterm(tmp_path, receiver):
    """One story, two watch processes (each a JVM): batches run and delivered; a batch whose
    gate fails waits for the next file; a watch SIGKILLed while its run holds the lock is
    started again and loses and doubles nothing; SIGTERM ends it after the step in progress."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_landing(landing, *batch(1), name="b1")
    watcher = Watcher(landing, lake, receiver, "--max-quarantine-ratio", "0.2")
    try:
        watcher.until(lambda: len(receiver.applied) == 6, "the first batch delivered")
        bad = ["not json"] * 6  # half of the batch's lines: over the ratio
        messages, events = batch(3)
        write_landing(landing, messages + bad, events, name="b3")
        watcher.until(lambda: "FAILED" in watcher.text(), "the failed gate")
        time.sleep(4 * EVERY)  # ticks with nothing new but the failed files: not run again
        assert watcher.text().count("FAILED") == 1 and len(receiver.applied) == 6
        write_landing(landing, *batch(4, keys=12), name="b4")  # enough good lines: both files pass
        watcher.until(lambda: len(receiver.applied) == 6 + 6 + 24, "the failed batch delivered with the next")
        runs = [line for line in watcher.lines if " run " in line and "records" in line]
        assert len(runs) == 2 and "12 records" in runs[0] and "correlations" in runs[0]
        passes = [line for line in watcher.lines if " pass: " in line]
        assert passes and all("sent" in line for line in passes)

        write_landing(landing, *batch(5, keys=40), name="b5")  # killed while its run holds the lake's lock
        watcher.until(lambda: Path(lock_path(str(lake))).exists(), "a run in progress")
        watcher.process.kill()
        watcher.process.wait(60)
    finally:
        if watcher.process.poll() is None:
            watcher.process.kill()
    again = Watcher(landing, lake, receiver, "--max-quarantine-ratio", "0.2")
    try:  # the killed run (computing, or writing: rolled back) is run again
        again.until(lambda: len(receiver.applied) == 36 + 80, "every event delivered after the restart")
        write_landing(landing, *batch(6), name="b6")
        again.until(lambda: len(receiver.applied) == 36 + 80 + 6, "the next batch delivered")
        again.process.send_signal(signal.SIGTERM)
        assert again.process.wait(120) == 0
        again.reader.join(10)
    finally:
        if again.process.poll() is None:
            again.process.kill()
    assert again.lines[-1].rstrip().endswith("correlake watch: stopped by SIGTERM after the step in progress")
    assert not_in_sequence(receiver.rows()) == {}  # every ordering key's 1, 2, 3... once, in order
    assert len(receiver.requests) == len(receiver.applied) == 122  # none sent twice
    assert len(DeltaTable(table_path(str(lake), "correlations")).to_pyarrow_table()) == 122
    assert len(DeltaTable(table_path(str(lake), "quarantine")).to_pyarrow_table()) == 6
