"""The lake lock's heartbeat (no Spark): a live holder keeps its lock however long it runs,
a holder whose heartbeat stopped loses it after the stale time, and learns it if it lives."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from correlake.lake import journal, lock

STALE = lock.LOCK_STALE_SECONDS  # far longer than any pause of the test: its lock's age is set with `aged`


class Beats:
    """A heartbeat's pace set by the test (`run_lock(..., pace=beats)`): it beats once per `beat()`."""

    def __init__(self):
        self.changed, self.asked, self.given, self.thread = threading.Condition(), 0, 0, None

    def __call__(self, stopped: threading.Event) -> bool:  # in the heartbeat's thread: wait for the next beat
        with self.changed:
            self.asked, self.thread = self.asked + 1, threading.current_thread()
            self.changed.notify_all()
            while self.given < self.asked and not stopped.is_set():
                self.changed.wait(0.01)  # `stopped` is looked at again each 10 ms
            return stopped.is_set()

    def beat(self) -> None:
        """Let one beat through; return once the heartbeat has made it (it waits for the next, or has ended)."""
        deadline = time.monotonic() + 60
        with self.changed:
            self.given += 1
            self.changed.notify_all()
            while self.asked <= self.given and not (self.thread and not self.thread.is_alive()):
                assert time.monotonic() < deadline, "the heartbeat made no beat"
                self.changed.wait(0.01)


def aged(path: Path, seconds: float) -> None:
    """The lock file as if `seconds` more had gone by since it was last written."""
    at = path.stat().st_mtime - seconds
    os.utime(path, (at, at))


def other_host(started: float = 0) -> dict:
    return {"pid": os.getpid(), "host": "another-host", "started": started}  # its pid not checked here


def test_a_live_holder_is_not_taken_over_however_old_its_lock(tmp_path):
    beats = Beats()
    with lock.run_lock(str(tmp_path), pace=beats):
        path = Path(lock.lock_path(str(tmp_path)))
        started = json.loads(path.read_text())["started"]
        for _ in range(3):  # held for 1.5 stale times, a beat every half of one
            aged(path, STALE / 2)
            assert lock._take(str(tmp_path), json.dumps(other_host()))[1]
            beats.beat()
        assert json.loads(path.read_text())["started"] == started
        with pytest.raises(lock.LakeBusy):
            lock.check_free(str(tmp_path))


def test_a_lock_whose_heartbeat_stopped_is_taken_over_after_the_stale_time(tmp_path):
    (tmp_path / "_state").mkdir()
    path = Path(lock.lock_path(str(tmp_path)))
    path.write_text(json.dumps(other_host(started=time.time())))  # written once, never refreshed
    with pytest.raises(lock.LakeBusy, match="another-host"):
        lock.check_free(str(tmp_path))
    os.utime(path, (time.time() - 2 * STALE,) * 2)
    with lock.run_lock(str(tmp_path)):
        assert json.loads(path.read_text())["host"] != "another-host"


def test_the_heartbeat_stops_when_the_lock_is_released(tmp_path):
    beats = Beats()
    with lock.run_lock(str(tmp_path), pace=beats):
        beating = [t for t in threading.enumerate() if t.name.startswith("correlake-lock-heartbeat")]
        assert len(beating) == 1 and beating[0].daemon
        aged(Path(lock.lock_path(str(tmp_path))), 1)
        mtime = Path(lock.lock_path(str(tmp_path))).stat().st_mtime_ns
        beats.beat()
        assert Path(lock.lock_path(str(tmp_path))).stat().st_mtime_ns > mtime  # it beats
    assert not beating[0].is_alive()
    assert not Path(lock.lock_path(str(tmp_path))).exists()
    lock.check_held(str(tmp_path))  # no lock held: nothing to have lost


def test_a_holder_that_lost_its_lock_notices_and_publishes_nothing(tmp_path, caplog):
    successor = other_host(started=time.time())
    beats = Beats()
    with caplog.at_level(logging.ERROR, logger=lock.__name__):
        with lock.run_lock(str(tmp_path), pace=beats):
            heartbeat = lock._held[str(tmp_path.resolve())]
            lock.check_held(str(tmp_path))
            Path(lock.lock_path(str(tmp_path))).write_text(json.dumps(successor))  # taken over, as stale
            for _ in range(2):  # at once (the lock file read), and once the heartbeat has found out
                with pytest.raises(lock.LockLost, match="lost the lock"):
                    with journal.journalled(None, str(tmp_path), "run-1"):  # before it writes anything
                        pass
                beats.beat()  # its next beat
                assert heartbeat.lost.wait(timeout=2)
            assert not (tmp_path / "_state" / "inflight.json").exists()
    assert "lost the lake's lock" in caplog.text
    assert json.loads(Path(lock.lock_path(str(tmp_path))).read_text()) == successor  # the successor's, kept


@pytest.mark.parametrize("command", [["run", "--landing", "{landing}"], ["maintain"]])
def test_a_lake_at_another_uri_or_an_unreachable_store_is_refused_before_any_work(tmp_path, capsys, command,
                                                                                   monkeypatch):
    from correlake.interfaces import cli

    (tmp_path / "messages").mkdir()
    args = [part.format(landing=tmp_path) for part in command]
    assert cli.main([*args, "--lake", "gs://bucket/lake"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gs://" in err and "S3-compatible object storage (s3a://" in err
    monkeypatch.setenv("CORRELAKE_S3_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert cli.main([*args, "--lake", "s3a://bucket/lake"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("correlake: cannot use s3a://bucket/lake as the lake: ")
