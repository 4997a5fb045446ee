"""`correlake watch` (contract: *Continuous runs*) as a user runs it: a process of its own
with a webhook sink, fed landing files while it runs, its faults armed by the test through
`crash_child.py`'s hooks (no timing windows). Each batch is run and delivered (every event
once in effect, in order per ordering key); a batch whose gate fails is not run again until
a new file comes and then runs with it; a tick that meets a busy lake tries again at the
next; a watch killed after a run's first MERGE commit is rolled back by the next; `run`
and `sql` go on beside an idle watch; SIGTERM during a run ends the watch after that run,
exit 0, its events left to the next pass; and a watch killed mid-pass leaves the next one
to resend the same events. The last two watches have nothing new to run and start no JVM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.delivery_helpers import Receiver, not_in_sequence, out_of_order
from support.helpers import write_landing

from correlake.config import table_path
from correlake.interfaces import cli
from correlake.lake import journal
from correlake.lake.lock import run_lock

EVERY = 1.0
DEADLINE = 300.0  # seconds a batch may take from landing to delivered on a loaded machine
CHILD = Path(__file__).parents[1] / "support" / "crash_child.py"


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


def taken(*batches: tuple[int, int]) -> list[tuple[int, str]]:
    """(message_key, element_instance_key) of the correlations of `batches` ((n, keys) each):
    each message takes the receive task of its own position."""
    return sorted((p, f"e{p}") for n, keys in batches for p in (m["position"] for m in batch(n, keys)[0]))


def correlated(lake: Path) -> list[tuple[int, str]]:
    rows = DeltaTable(table_path(str(lake), "correlations")).to_pyarrow_table().to_pylist()
    return sorted((r["message_key"], r["element_instance_key"]) for r in rows)


class Watcher:
    """A `correlake watch` child process (`crash_child.py watch`: its faults armed by files
    in `armed`); its output lines as they come."""

    def __init__(self, landing: Path, lake: Path, armed: Path, receiver: Receiver):
        command = [sys.executable, str(CHILD), "watch", str(armed), "--landing", str(landing),
                   "--lake", str(lake), "--every", str(EVERY), "--max-quarantine-ratio", "0.2", "--sink", "webhook",
                   "--url", receiver.url, "--retry-base", "0.01", "--retry-cap", "0.05"]
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

    def ended(self) -> int:
        """Its exit code, once it has ended (as a fault armed ends it) and said all it had to."""
        code = self.process.wait(DEADLINE)
        self.reader.join(10)
        return code

    def text(self) -> str:
        return "".join(self.lines)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(60)


def kill_at_request(receiver: Receiver, nth: int) -> tuple[list[str], Callable[[int], None]]:
    """SIGKILL a watch when the receiver has taken `nth` requests, before answering the one that
    made them `nth`: its event applied, its acknowledgement never received. Armed before the
    watch starts; returns a list that gets that event's id, and the function that names the
    watch's pid (the request waits for it)."""
    answer, cut_short, pid, named = receiver.answer, [], [], threading.Event()

    def answer_then_kill(headers, body):
        status = answer(headers, body)
        with receiver.lock:
            if len(receiver.requests) >= nth and not cut_short:
                cut_short.append(json.loads(body)["event_id"])
                named.wait(DEADLINE)
                os.kill(pid[0], signal.SIGKILL)
        return status

    receiver.answer = answer_then_kill
    return cut_short, lambda watch_pid: pid.append(watch_pid) or named.set()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def test_watch_under_fire(tmp_path, receiver, spark, capsys):
    """One story, four watch processes, each ended by a fault the test arms; the first two
    start a JVM each, the last two (nothing new to run, a pass each) none."""
    landing, lake, armed = tmp_path / "landing", tmp_path / "lake", tmp_path / "armed"
    armed.mkdir()
    write_landing(landing, *batch(1), name="b1")
    with Watcher(landing, lake, armed, receiver) as first:
        first.until(lambda: len(receiver.applied) == 6, "the first batch delivered")
        bad = ["not json"] * 6  # half of the batch's lines: over the ratio
        messages, events = batch(3)
        write_landing(landing, messages + bad, events, name="b3")
        first.until(lambda: "FAILED" in first.text(), "the failed gate")
        time.sleep(4 * EVERY)  # ticks with nothing new but the failed files: not run again
        assert first.text().count("FAILED") == 1 and len(receiver.applied) == 6
        write_landing(landing, *batch(4, keys=12), name="b4")  # enough good lines: both files pass
        first.until(lambda: len(receiver.applied) == 6 + 6 + 24, "the failed batch delivered with the next")
        runs = [line for line in first.lines if " run " in line and "records" in line]
        assert len(runs) == 2 and "12 records" in runs[0] and "correlations" in runs[0]
        passes = [line for line in first.lines if " pass: " in line]
        assert passes and all("sent" in line for line in passes)

        with run_lock(str(lake)):  # another run holds the lake: the tick says so, and tries again at the next
            write_landing(landing, *batch(5), name="b5")
            first.until(lambda: "next try in 1 s" in first.text(), "a tick that met the busy lake")
            (armed / "kill").touch()  # the next tick runs b5, killed after its first MERGE has committed
        assert first.ended() == -signal.SIGKILL, first.text()
    dead = journal.unfinished_run(str(lake))
    assert dead and not (armed / "kill").exists()

    with Watcher(landing, lake, armed, receiver) as second:
        second.until(lambda: len(receiver.applied) == 42, "b5 delivered after the restart")
        assert f"rolled back the unfinished run {dead} first, 12 records" in second.text()
        assert correlated(lake) == taken((1, 3), (3, 3), (4, 12), (5, 3))

        (armed / "idle").touch()  # the watch idle: `run` and `sql` beside it, the lock taken only by the run
        second.until(lambda: (armed / "idle.seen").exists(), "an idle tick")
        write_landing(landing, *batch(6), name="b6")
        assert cli.main(["run", "--landing", str(landing), "--lake", str(lake)]) == 0
        capsys.readouterr()
        assert cli.main(["sql", "--lake", str(lake), "SELECT count(*) AS n FROM gold_correlations"]) == 0
        assert capsys.readouterr().out.split("\n")[2].strip() == "48"
        (armed / "idle").unlink()
        second.until(lambda: len(receiver.applied) == 48, "the other run's events delivered by the watch")

        (armed / "term").touch()  # SIGTERM after b7's run's first MERGE: the run ends, the watch after it
        write_landing(landing, *batch(7), name="b7")
        assert second.ended() == 0, second.text()
    last_run = [line for line in second.lines if " run " in line and "records" in line][-1]
    assert "12 records" in last_run and "6 events to deliver" in last_run, second.text()
    assert not [line for line in second.lines[second.lines.index(last_run):] if " pass: " in line]
    assert second.lines[-1].rstrip().endswith("correlake watch: stopped by SIGTERM after the step in progress")
    assert journal.unfinished_run(str(lake)) is None and not (armed / "term").exists()
    assert correlated(lake) == taken((1, 3), (3, 3), (4, 12), (5, 3), (6, 3), (7, 3))
    assert len(receiver.applied) == 48  # b7's events wait for the next pass: the watch ended after the run

    start = len(receiver.requests)
    cut_short, name_the_watch = kill_at_request(receiver, start + 3)  # in the third watch's first pass
    with Watcher(landing, lake, armed, receiver) as third:
        name_the_watch(third.process.pid)
        assert third.ended() == -signal.SIGKILL, third.text()
    sent_by_the_dead = {request[0] for request in receiver.requests[start:]}

    with Watcher(landing, lake, armed, receiver) as fourth:
        def sent_again() -> set[str]:
            return {event_id for event_id, n in Counter(r[0] for r in receiver.requests).items() if n > 1}

        # the cut-short event was applied before the kill: 54 applied can come before its resend
        fourth.until(lambda: len(receiver.applied) == 54 and set(cut_short) <= sent_again(),
                     "b7 delivered after the restart, the cut-short event sent again")
        assert sent_again() <= sent_by_the_dead  # at least once, the same event ids
        fourth.process.send_signal(signal.SIGTERM)
        assert fourth.ended() == 0, fourth.text()
    assert not [line for line in third.lines + fourth.lines if " run " in line]  # nothing new: no run, no JVM
    assert not_in_sequence(receiver.applied_rows()) == {} and out_of_order(receiver.rows()) == {}
    assert len(DeltaTable(table_path(str(lake), "quarantine")).to_pyarrow_table()) == 6
