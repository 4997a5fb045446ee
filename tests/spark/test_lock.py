"""The lake's run lock: one run at a time, a dead holder's lock is taken over; the
run journal: written whole or not at all, and unreadable is a clear error."""

from __future__ import annotations

import errno
import json
import os
import socket
import time

import pytest
from support.helpers import lock_takers_that_won

from correlake.interfaces import cli
from correlake.lake import catalog, journal, lock


def test_second_run_is_refused_while_the_first_holds_the_lock(tmp_path):
    with lock.run_lock(str(tmp_path)):
        with pytest.raises(lock.LakeBusy, match="another correlake run holds"):
            with lock.run_lock(str(tmp_path)):
                pass
    with lock.run_lock(str(tmp_path)):  # released
        pass


def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    state = tmp_path / "_state"
    state.mkdir()
    (state / "lock").write_text(json.dumps({"pid": 2 ** 22 + 12345, "host": socket.gethostname(),
                                            "started": 0}))
    with lock.run_lock(str(tmp_path)):
        assert json.loads((state / "lock").read_text())["pid"] != 2 ** 22 + 12345
    assert not (state / "lock").exists()


def test_a_lock_file_not_written_by_a_run_is_held_a_minute_then_taken_over(tmp_path):
    state = tmp_path / "_state"
    state.mkdir()
    (state / "lock").write_text("")  # a run writes its lock whole, in one step: this is none of them
    with pytest.raises(lock.LakeBusy):
        lock.check_free(str(tmp_path))
    os.utime(state / "lock", (time.time() - 120, time.time() - 120))
    with lock.run_lock(str(tmp_path)):
        assert json.loads((state / "lock").read_text())["pid"] == os.getpid()


def test_a_stale_lock_is_taken_over_by_one_process_only(tmp_path):
    """Many takers at once of one dead run's lock (each as its own open file, as processes are)."""
    stale = json.dumps({"pid": 2 ** 22 + 12345, "host": socket.gethostname(), "started": time.time()})
    for attempt in range(5):
        (tmp_path / "_state").mkdir(exist_ok=True)
        (tmp_path / "_state" / "lock").write_text(stale)
        winners = lock_takers_that_won(str(tmp_path), 8)
        assert len(winners) == 1, attempt
        assert json.loads((tmp_path / "_state" / "lock").read_text())["pid"] == winners[0]


def test_a_run_releases_its_own_lock_only(tmp_path):
    successor = {"pid": 1, "host": "another", "started": time.time()}
    with lock.run_lock(str(tmp_path)):  # ... that another run took over meanwhile, as stale
        (tmp_path / "_state" / "lock").write_text(json.dumps(successor))
    assert json.loads((tmp_path / "_state" / "lock").read_text()) == successor


def test_a_full_disk_leaves_neither_a_lock_nor_a_journal_behind(tmp_path, monkeypatch):
    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "_state").mkdir()
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        with lock.run_lock(str(tmp_path)):
            pass
    with pytest.raises(OSError, match="No space left"):
        journal.begin(str(tmp_path), "run-1")
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "_state").iterdir()] == ["lock.guard"]
    with lock.run_lock(str(tmp_path)):  # free
        assert journal.unfinished_run(str(tmp_path)) is None


def test_an_unreadable_journal_stops_the_run_with_a_clear_line(spark, tmp_path, capsys):
    landing, lake_dir = tmp_path / "landing", tmp_path / "lake"
    for stream in ("messages", "workflow_events"):
        (landing / stream).mkdir(parents=True)
    (lake_dir / "_state").mkdir(parents=True)
    (lake_dir / "_state" / "inflight.json").write_text('{"run_id": "r1", "vers')
    assert cli.main(["run", "--landing", str(landing), "--lake", str(lake_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith(
        f"correlake: the journal of an unfinished run, {lake_dir / '_state' / 'inflight.json'}, cannot be read")
    assert "RESTORE what that run wrote, then remove the file" in err
    warning = catalog.unfinished_warning(lake_dir)
    assert "its journal" in warning and "cannot be read" in warning
