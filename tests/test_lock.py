"""The lake's run lock: one run at a time, a dead holder's lock is taken over."""

from __future__ import annotations

import json
import socket

import pytest

from correlake import lake


def test_second_run_is_refused_while_the_first_holds_the_lock(tmp_path):
    with lake.run_lock(str(tmp_path)):
        with pytest.raises(lake.LakeBusy, match="another correlake run holds"):
            with lake.run_lock(str(tmp_path)):
                pass
    with lake.run_lock(str(tmp_path)):  # released
        pass


def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    state = tmp_path / "_state"
    state.mkdir()
    (state / "lock").write_text(json.dumps({"pid": 2 ** 22 + 12345, "host": socket.gethostname(),
                                            "started": 0}))
    with lake.run_lock(str(tmp_path)):
        assert json.loads((state / "lock").read_text())["pid"] != 2 ** 22 + 12345
    assert not (state / "lock").exists()
