"""Progress lines: said to the caller's listener only, from any thread, none without one."""

from __future__ import annotations

import threading

from correlake import progress
from correlake.config import progress_wanted


def test_steps_reach_the_listener_of_the_block_only():
    heard = []
    progress.step("before")
    with progress.to(heard.append):
        progress.step("one")
        threads = [threading.Thread(target=progress.step, args=(f"t{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with progress.to(None):
            progress.step("muted")
    progress.step("after")
    assert heard[0] == "one" and sorted(heard[1:]) == ["t0", "t1", "t2", "t3"]


def test_wanted_on_a_terminal_or_when_asked(monkeypatch):
    monkeypatch.setenv("CORRELAKE_PROGRESS", "1")
    assert progress_wanted()
    monkeypatch.setenv("CORRELAKE_PROGRESS", "0")
    assert not progress_wanted()
    monkeypatch.delenv("CORRELAKE_PROGRESS")
    assert not progress_wanted()  # pytest's stderr is not a terminal: CI and Airflow stay quiet
