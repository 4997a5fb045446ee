"""The long-lived driver (`correlake serve`, `client.call`): runs and Airflow's stages on it
give the gold of an in-process run; errors travel back as themselves; only key holders
are served; a driver that is absent or gone is a clear fallback or error. The driver
`served` is the test session's (conftest.py), which other modules' child processes use too."""

from __future__ import annotations

import os
import pickle
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener
from pathlib import Path
from socket import AF_UNIX
from socket import socket as unix_socket

import pytest
from support.helpers import opened, publish, sorted_gold, start_driver, write_landing

from correlake.config import SparkSettings, table_path, validation_results_dir
from correlake.driver import client, kept, launch, server, warm_up
from correlake.driver import idle as driver_idle
from correlake.interfaces import cli
from correlake.quality.gates import GateFailed
from correlake.run import pipeline
from correlake.run.summary import findings

CORRELAKE = str(Path(sys.executable).with_name("correlake"))


@pytest.fixture(scope="module")
def landing_and_local_lake(small_demo):
    """A small demo landing and the lake of an in-process run over it (the session's)."""
    return small_demo


def _cli(socket: Path, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([CORRELAKE, *args], env={**os.environ, "CORRELAKE_DRIVER": str(socket), **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_a_run_on_the_driver_gives_the_gold_of_an_in_process_run(spark, served, landing_and_local_lake, tmp_path):
    socket, log = served
    landing, local_lake = landing_and_local_lake
    assert stat.S_IMODE(socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(socket.with_name("driver.sock.key").stat().st_mode) == 0o600
    with pytest.raises(AuthenticationError):  # a caller without the key is refused ...
        Client(str(socket), family="AF_UNIX", authkey=b"not the key")
    # ... and others are served; a relative path is the caller's, not the driver's
    done = _cli(socket, "run", "--landing", str(landing), "--lake", "lake", cwd=tmp_path, CORRELAKE_PROGRESS="1")
    assert done.returncode == 0, done.stderr
    assert "correlake run" in done.stdout and "correlake driver: run done" in log.read_text()
    steps = re.findall(r"^correlake: \d\d:\d\d:\d\d run: (.+) in [\d.]+ s$", done.stderr, re.MULTILINE)
    assert sorted(steps) == sorted(["bronze done", "silver done", "gold done", "gate bronze passed",
                                    "gate silver passed", "gate gold passed", "write done"]), done.stderr
    assert sorted_gold(str(tmp_path / "lake")) == sorted_gold(local_lake)
    again = _cli(socket, "run", "--landing", str(landing), "--lake", str(tmp_path / "lake"))
    assert again.returncode == 0 and "nothing new" in again.stdout
    # the analysts' commands go to the driver too: no JVM in the caller, nothing of one on its output
    asked = _cli(socket, "sql", "--lake", "lake", "SELECT count(*) AS n FROM gold_correlations", cwd=tmp_path)
    assert asked.returncode == 0 and asked.stderr == "" and "(1 row)" in asked.stdout
    assert "correlake driver: sql done" in log.read_text()
    report = _cli(socket, "report", "--lake", "lake", "--out", "r.html", cwd=tmp_path, CORRELAKE_PROGRESS="1")
    assert report.returncode == 0 and (tmp_path / "r.html").exists() and "report: 1/" in report.stderr


def test_a_failing_gate_on_the_driver_fails_the_caller_with_its_report(served, landing_and_local_lake, tmp_path):
    socket, log = served
    landing, _ = landing_and_local_lake
    failed = _cli(socket, "run", "--landing", str(landing), "--lake", str(tmp_path / "lake"),
                  "--max-quarantine-ratio", "0")
    assert failed.returncode == 1
    assert "data-quality gate 'max_quarantine_ratio' failed" in failed.stderr and "quarantined" in failed.stderr
    assert not (tmp_path / "lake" / "gold").exists()
    assert "correlake driver: run failed" in log.read_text()


def test_airflow_tasks_run_their_stages_on_the_driver(spark, served, correlake_dag, maintenance_dag,
                                                     landing_and_local_lake, tmp_path, monkeypatch, capfd):
    socket, log = served
    landing, local_lake = landing_and_local_lake
    served_before = log.read_text().count("done in")
    monkeypatch.setenv("CORRELAKE_DRIVER", str(socket))
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LANDING", str(landing))
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", str(tmp_path / "lake"))
    # the defaults, explicitly: the session's DAG object keeps an earlier test's run_conf
    run = correlake_dag.test(run_conf={"as_of": None, "rebuild": False, "max_quarantine_ratio": None,
                                       "dry_run": False})
    assert {str(ti.state) for ti in run.get_task_instances()} == {"success"}
    # prepare, three stages, three gates, publish, the stats' findings and counts by reason
    assert log.read_text().count("done in") - served_before == 10
    assert "correlake driver: reasons done in" in log.read_text()
    assert sorted_gold(str(tmp_path / "lake")) == sorted_gold(local_lake)
    capfd.readouterr()
    run = maintenance_dag.test(run_conf={"retain_hours": None, "dry_run": True})
    assert {str(ti.state) for ti in run.get_task_instances()} == {"success"}
    assert log.read_text().rstrip().splitlines()[-1].startswith("correlake driver: maintain done in")
    assert "correlake maintain (dry run)" in capfd.readouterr().out


def test_a_caller_gone_mid_call_stops_its_call_and_the_driver_serves_on(served, landing_and_local_lake, tmp_path,
                                                                         monkeypatch):
    """A `correlake run` killed while the driver runs its call (Airflow killing a task, a
    timeout): the driver stops the call, which writes nothing, and serves the next."""
    socket, log = served
    landing, local_lake = landing_and_local_lake
    lake = tmp_path / "lake"
    logged_before = len(log.read_text())  # the session's driver: earlier tests' calls are in its log
    caller = subprocess.Popen([CORRELAKE, "run", "--landing", str(landing), "--lake", str(lake)],
                              env={**os.environ, "CORRELAKE_DRIVER": str(socket)})
    deadline = time.time() + 300
    # the driver is running the call: it holds the lake's lock and its bronze gate has passed
    # (that validation is in the lake), silver and gold are still to come
    while not ((lake / "_state" / "lock").exists() and any(validation_results_dir(lake).rglob("*.json"))) \
            and caller.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert caller.poll() is None and (lake / "_state" / "lock").exists(), "the call did not get under way"
    caller.kill()
    caller.wait()
    monkeypatch.setenv("CORRELAKE_DRIVER", str(socket))
    client.call(findings, local_lake)  # served on, once the stopped call has ended (one call at a time)
    assert log.read_text().rstrip().splitlines()[-1].startswith("correlake driver: findings done")
    assert "correlake driver: the caller of run went away; its call was stopped" in log.read_text()[logged_before:]
    assert not (lake / "_state" / "lock").exists() and not (lake / "gold").exists()


def test_a_silent_caller_does_not_stall_the_driver(served, landing_and_local_lake, monkeypatch):
    """A client that connects and sends nothing is dropped after DRIVER_HANDSHAKE_SECONDS."""
    socket_path, _ = served
    _, local_lake = landing_and_local_lake
    monkeypatch.setenv("CORRELAKE_DRIVER", str(socket_path))
    answers = []
    with unix_socket(AF_UNIX) as silent:
        silent.connect(str(socket_path))
        caller = threading.Thread(target=lambda: answers.append(client.call(findings, local_lake)), daemon=True)
        caller.start()
        caller.join(timeout=120)
        assert not caller.is_alive() and answers[0].startswith("gold:")


def test_a_key_file_others_can_write_is_refused(landing_and_local_lake, tmp_path, monkeypatch, capsys):
    landing, _ = landing_and_local_lake
    socket_path = tmp_path.resolve() / "d.sock"
    socket_path.touch(0o600)
    socket_path.with_name("d.sock.key").write_bytes(b"k" * 32)
    socket_path.with_name("d.sock.key").chmod(0o620)
    monkeypatch.setenv("CORRELAKE_DRIVER", str(socket_path))
    assert cli.main(["run", "--landing", str(landing), "--lake", str(tmp_path / "lake")]) == 2
    err = capsys.readouterr().err
    assert err == (f"correlake: refusing to call the driver: {socket_path}.key is group- or world-writable "
                   "(mode 620); it must be 600\n")


def test_a_driver_whose_jvm_died_fails_the_call_and_stops(landing_and_local_lake, tmp_path):
    process, socket, log = start_driver(tmp_path)
    os.kill(launch.jvm_pid(process.pid), signal.SIGKILL)  # as the kernel's OOM killer would
    landing, _ = landing_and_local_lake
    failed = _cli(socket, "run", "--landing", str(landing), "--lake", str(tmp_path / "lake"))
    assert failed.returncode != 0 and "the driver failed" in failed.stderr
    assert process.wait(60) == 2  # so that a supervisor starts a new one
    assert "Spark's JVM is gone; the driver stops" in log.read_text()
    assert not socket.exists()


def test_a_second_driver_on_the_same_socket_is_refused(served):
    socket, _ = served
    refused = subprocess.run([CORRELAKE, "serve", "--warm-up", "0", "--socket", str(socket)], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and f"a driver already serves {socket}" in refused.stderr


def test_without_a_driver_the_call_runs_in_this_process(demo_lake, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CORRELAKE_DRIVER", str(tmp_path / "nobody.sock"))
    assert client.call(findings, demo_lake).startswith("gold:\n  messages     CORRELATED")
    assert f"no driver serves {tmp_path / 'nobody.sock'}" in capsys.readouterr().err


def _accept_and_die(listener: Listener) -> None:
    with listener.accept() as conn:
        conn.recv()


def _refuse(listener: Listener) -> None:
    try:
        listener.accept()
    except AuthenticationError:
        return
    raise AssertionError("the caller was accepted")


@pytest.mark.parametrize("driver_key, serve, error", [
    (b"k" * 32, _accept_and_die, "stopped during run; the lake's journal rolls back"),
    # a driver started again has a new key; a caller that read the old one is refused
    (b"new key", _refuse, "cannot call the driver at .*AuthenticationError"),
])
def test_a_driver_gone_mid_call_or_with_another_key_is_a_clear_error(tmp_path, monkeypatch, driver_key, serve,
                                                                      error):
    socket = tmp_path / "d.sock"
    socket.with_name("d.sock.key").write_bytes(b"k" * 32)
    listener = Listener(str(socket), family="AF_UNIX", authkey=driver_key)
    failures = []
    thread = threading.Thread(target=lambda: _recording(failures, serve, listener))
    thread.start()
    monkeypatch.setenv("CORRELAKE_DRIVER", str(socket))
    with pytest.raises(client.DriverError, match=error):
        client.call(pipeline.run, "landing", "lake")
    thread.join()
    listener.close()
    assert failures == []


def _recording(failures: list, serve, listener: Listener) -> None:
    """`serve(listener)` in a thread, with what it raised kept for the test's own thread."""
    try:
        serve(listener)
    except BaseException as exc:
        failures.append(exc)


def test_correlake_errors_travel_back_as_themselves_others_with_their_traceback():
    gate = pickle.loads(pickle.dumps(server.portable(GateFailed("silver", "3 rows failed"))))
    assert isinstance(gate, GateFailed) and (gate.gate, gate.report) == ("silver", "3 rows failed")
    try:
        raise MemoryError("java.lang.OutOfMemoryError: Java heap space")
    except MemoryError as exc:
        other = pickle.loads(pickle.dumps(server.portable(exc)))
    assert isinstance(other, client.RemoteError)
    assert "MemoryError: java.lang.OutOfMemoryError: Java heap space" in str(other)
    assert "--- driver traceback ---" in str(other) and "test_driver.py" in str(other)


def test_warm_up_runs_a_first_run_and_increments_and_leaves_nothing(spark):
    before = set(Path(tempfile.gettempdir()).glob("correlake-warm-up-*"))
    asked = []
    seconds = warm_up.warm_up(spark, rounds=3, records=400, until=lambda: asked.append(1) or len(asked) > 1)
    assert len(seconds) == 2 and all(s > 0 for s in seconds)  # the first run, one increment, then a call came
    assert set(Path(tempfile.gettempdir()).glob("correlake-warm-up-*")) == before


def test_a_run_without_a_driver_leaves_one_behind_that_serves_the_next_and_stops_when_idle(spark, tmp_path):
    settings, t0 = SparkSettings(), 1767225600000
    env = {**os.environ, "CORRELAKE_HOME": str(tmp_path / "home"), "CORRELAKE_JARS": str(settings.jars_dir),
           "CORRELAKE_S3_JARS": str(settings.s3_jars_dir), "CORRELAKE_KEEP_DRIVER": "10",
           "CORRELAKE_DRIVER_MEMORY": "1g"}
    env.pop("CORRELAKE_DRIVER", None)
    landing, lake = tmp_path / "landing", tmp_path / "lake"

    def run() -> subprocess.CompletedProcess:
        done = subprocess.run([CORRELAKE, "run", "--landing", str(landing), "--lake", str(lake)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done

    write_landing(landing, [publish(1, "a", t0 + 10)], [opened(1, "a", t0 + 20), opened(2, "b", t0 + 5)], name="1")
    first = run()
    pid = int(re.search(r"started a driver \(pid (\d+)", first.stderr).group(1))
    folder = tmp_path / "home" / "drivers"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    [log] = folder.glob("*.log")
    [socket] = folder.glob("*.sock")
    jvm = int(subprocess.run(["pgrep", "-P", str(pid), "java"], capture_output=True, text=True).stdout.split()[0])
    write_landing(landing, [publish(2, "b", t0 + 30)], [], name="2")
    second = run()  # a fresh process, the next run on that lake: served by the same driver
    assert "started a driver" not in second.stderr and log.read_text().count("correlake driver: run done") == 2
    correlations = spark.read.format("delta").load(table_path(str(lake), "correlations"))
    assert {(r.message_key, r.element_instance_key) for r in correlations.collect()} == {(1, "e1"), (2, "e2")}
    deadline = time.monotonic() + 90
    while (_alive(pid) or _alive(jvm)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not _alive(pid) and not _alive(jvm), "the kept driver and its JVM stop when idle"
    assert log.read_text().rstrip().endswith("correlake driver: no call for 10 s; it stops")
    assert not socket.exists() and not socket.with_name(socket.name + ".key").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def test_a_kept_driver_is_one_per_set_up_warms_up_once_idle_gives_back_memory_and_stops_once_its_code_changed(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CORRELAKE_HOME", str(tmp_path))
    folder = kept._folder()
    assert kept._socket(folder) == kept._socket(folder)
    monkeypatch.setenv("CORRELAKE_SHUFFLE_PARTITIONS", "7")
    other_setup = kept._socket(folder)
    monkeypatch.setenv("CORRELAKE_SHUFFLE_PARTITIONS", "8")
    assert kept._socket(folder) != other_setup
    monkeypatch.setenv("CORRELAKE_KEEP_DRIVER", "0")
    assert kept.address() is None

    version, warmed = ["v1"], []
    monkeypatch.setattr(kept, "code_version", lambda: version[0])
    monkeypatch.setattr(driver_idle, "warm_up",
                        lambda spark, rounds, records, until: warmed.append((rounds, records, until())) or [1.0])
    now = [0.0]  # the idle time's clock, moved on by the test

    def clock() -> float:
        return now[0]

    unasked, idle = driver_idle.Idle(3600, clock=clock), driver_idle.Idle(3600, warm_up_rounds=6, clock=clock)
    assert idle.stop_reason() is None and not idle.warm_up_due()
    now[0] += driver_idle.WARM_UP_AFTER_SECONDS
    assert idle.warm_up_due()  # idle a while: it warms up, once (CORRELAKE_KEEP_DRIVER_WARM_UP=6)
    assert not unasked.warm_up_due() and unasked.give_back_due()  # by default: no CPU spent between calls
    idle.warm_up(spark=None, called=lambda: True)
    assert warmed == [(6, driver_idle.WARM_UP_RECORDS, True)] and idle.stop_reason() is None
    assert not idle.give_back_due()  # idle again from the warm-up's end
    now[0] += driver_idle.WARM_UP_AFTER_SECONDS
    assert not idle.warm_up_due() and idle.give_back_due()  # then its free heap given back, once an idle time
    gave = []
    monkeypatch.setattr(driver_idle, "give_back_memory", lambda spark: gave.append(spark) or (3 * 2 ** 30, 2 * 2 ** 30))
    idle.give_back(spark=None)
    assert gave == [None] and not idle.give_back_due()
    assert "idle, gave back 1.0 GB of heap (3.0 → 2.0 GB committed)" in capsys.readouterr().out
    idle.served()  # a call
    now[0] += driver_idle.WARM_UP_AFTER_SECONDS
    assert idle.give_back_due() and not idle.warm_up_due()
    version[0] = "v2"
    assert idle.stop_reason() == "its code changed on disk"
    short = driver_idle.Idle(0.01, clock=clock)
    now[0] += 0.05
    assert short.stop_reason() == "no call for 0.01 s"
