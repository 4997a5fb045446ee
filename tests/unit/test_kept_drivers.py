"""The kept drivers a user can see and stop (`correlake serve --list`, `--stop`), and one at
a time: a kept driver started for another set-up stops the one before. The drivers here
are stand-ins that listen and log as `correlake serve` does (a JVM each would be minutes);
the finding, naming and stopping is what is tested."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from correlake.driver import kept
from correlake.driver.protocol import READY, serving
from correlake.interfaces import cli

STAND_IN = f"""
import os, signal, socket, sys
path = sys.argv[2]
listener = socket.socket(socket.AF_UNIX)
listener.bind(path)
listener.listen()
def stop(*_):
    os.unlink(path)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(path[:-len(".sock")] + ".log", "w") as log:
    log.write(f"{READY} {{path}} (pid {{os.getpid()}})\\n")
signal.pause()
"""


@pytest.fixture
def drivers_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRELAKE_HOME", str(tmp_path))
    monkeypatch.setenv("CORRELAKE_KEEP_DRIVER", "7200")
    folder = tmp_path / "drivers"
    folder.mkdir()
    started = []
    yield folder, started
    for process in started:
        process.kill()
        process.wait()


def stand_in(folder: Path, started: list, name: str) -> subprocess.Popen:
    sock = folder / f"{name}.sock"
    process = subprocess.Popen([sys.executable, "-c", STAND_IN, "serve", str(sock)])
    started.append(process)
    deadline = time.monotonic() + 60
    while READY not in (sock.with_suffix(".log").read_text() if sock.with_suffix(".log").exists() else ""):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    return process


def test_the_kept_drivers_are_listed_and_stopped(drivers_home, capsys):
    folder, started = drivers_home
    first, second = stand_in(folder, started, "a"), stand_in(folder, started, "b")
    (folder / "c.log").write_text(f"{READY} {folder / 'c.sock'} (pid {os.getpid()})\n")  # not a serve of its socket
    assert [(d.socket.name, d.pid) for d in kept.kept_drivers()] == [("a.sock", first.pid), ("b.sock", second.pid)]

    assert cli.main(["serve", "--list"]) == 0
    out = capsys.readouterr().out
    assert f"kept driver pid {first.pid}" in out and f"log {folder / 'b.log'}" in out and "MiB resident" in out
    assert cli.main(["serve", "--stop"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"kept driver pid {first.pid}: stopped",
                                                    f"kept driver pid {second.pid}: stopped"]
    assert first.wait(30) == 0 and second.wait(30) == 0
    assert kept.kept_drivers() == [] and cli.main(["serve", "--list"]) == 0
    assert capsys.readouterr().out == "no kept driver\n"


def test_a_kept_driver_started_for_another_set_up_stops_the_one_before(drivers_home, monkeypatch):
    folder, started = drivers_home
    before = stand_in(folder, started, "other-set-up")
    spawned = []

    def spawn(sock, log, **options):  # the new driver (its start is what test_driver.py runs for real)
        assert not serving(folder / "other-set-up.sock"), "two kept drivers at once"
        spawned.append(sock)
        return SimpleNamespace(pid=0)

    monkeypatch.setattr(kept, "spawn", spawn)
    kept.start(folder / "this-set-up.sock")
    assert spawned == [folder / "this-set-up.sock"] and before.wait(30) == 0


def test_the_run_path_is_a_calls_setting_not_a_set_up_of_its_own(drivers_home, monkeypatch):
    folder, _ = drivers_home
    monkeypatch.delenv("CORRELAKE_RUN_PATH", raising=False)
    socket = kept._socket(folder)
    for path in ("driver", "spark"):  # each `correlake run` passes it (interfaces/commands/run.py)
        monkeypatch.setenv("CORRELAKE_RUN_PATH", path)
        assert kept._socket(folder) == socket
    monkeypatch.setenv("CORRELAKE_SHUFFLE_PARTITIONS", "7")
    assert kept._socket(folder) != socket
