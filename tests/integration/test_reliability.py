"""Crashes, concurrent runs and staged runs on one lake (issue: incremental hourly runs).

One workload of generated cases lands in two parts. The reference lake ingests them
in two uninterrupted runs; every other lake starts from a copy of the reference after
part one, and its second run is killed (SIGKILL) at a chosen point, then rerun.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.generators import combine, generate_cases
from support.helpers import flock_waiters, project, read_gold, versions, write_jsonl
from support.lake_rows import table_rows
from support.outbox_model import assert_outbox_agrees

from correlake.config import TABLES, data_docs_dir, table_path
from correlake.interfaces import cli
from correlake.lake import journal, restate
from correlake.lake import tables as lake
from correlake.quality import gates
from correlake.run import pipeline, stepwise
from correlake.run.backends import driver
from correlake.run.backends import spark as spark_backend
from correlake.run.staged import LakeMoved
from correlake.run.store import staged_runs_dir

CRASH_POINTS = ("silver", "merge")
INGESTION = ("_ingested_at", "_run_id")  # when and by which run a record came: not in a snapshot
HERE = Path(__file__).parents[1] / "support"  # where crash_child.py is


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):
    """(landing, lake after part one, reference lake after both parts, its snapshot)."""
    root = tmp_path_factory.mktemp("reliability")
    messages, events = combine(generate_cases(20))
    half_m, half_e = len(messages) // 2, len(events) // 2
    landing = root / "landing"
    write_jsonl(landing / "messages" / "1.jsonl", messages[:half_m])
    write_jsonl(landing / "workflow_events" / "1.jsonl", events[:half_e])
    base = str(root / "base")
    pipeline.run(spark, str(landing), base, max_quarantine_ratio=1.0)
    write_jsonl(landing / "messages" / "2.jsonl", messages[half_m:])
    write_jsonl(landing / "workflow_events" / "2.jsonl", events[half_e:])
    reference = copy_lake(base, root / "reference")
    pipeline.run(spark, str(landing), reference, max_quarantine_ratio=1.0)
    assert_outbox_agrees(reference)
    return landing, base, reference, snapshot(reference)


def copy_lake(source: str, target: Path) -> str:
    shutil.copytree(source, target)
    return str(target)


def snapshot(lake_dir: str) -> dict:
    """Gold rows, and bronze/quarantine/outbox contents without ingestion metadata (the
    outbox's events are the same whichever run made them); read with delta-rs."""
    out = {name: project(rows, None) for name, rows in read_gold(lake_dir).items()}
    for name in ("bronze_messages", "bronze_workflow_events", "quarantine", "outbox"):
        out[name] = project(table_rows(lake_dir, name, lambda columns: [c for c in columns if c not in INGESTION]), None)
    return out


def test_a_run_killed_anywhere_is_rolled_back_and_the_next_run_converges(spark, world, tmp_path):
    """Killed before publishing (computing silver), the lake is the one the reference's
    second run started from, version for version; killed while publishing (a MERGE
    committed, others in flight), the next run rolls back and converges."""
    landing, base, _, reference = world
    before = versions(base)
    lakes = {point: copy_lake(base, tmp_path / point) for point in CRASH_POINTS}
    spawn = lambda point: subprocess.Popen(  # noqa: E731
        [sys.executable, "crash_child.py", str(landing), lakes[point], point],
        cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs = {point: spawn(point) for point in CRASH_POINTS}  # two child JVMs: one per core
    outputs = {point: procs[point].communicate(timeout=600)[0] for point in CRASH_POINTS}
    for point, proc in procs.items():
        assert proc.returncode == -9, f"{point}: expected a SIGKILL, got {proc.returncode}\n{outputs[point][-3000:]}"
    for point, lake_dir in lakes.items():
        assert (Path(lake_dir) / "_state" / "lock").exists(), point  # left behind by the dead process
        if point == "silver":  # no commit: every table is as it was
            assert versions(lake_dir) == before, point
            continue
        for name in TABLES:  # every table stays readable after a kill between commits
            if lake.is_table(table_path(lake_dir, name)):
                spark.read.format("delta").load(table_path(lake_dir, name)).count()
        dead_run = journal.unfinished_run(lake_dir)
        assert dead_run, point
        # what readers outside the lock (delivery) read: still the versions before the dead run
        assert {name: journal.published_version(lake_dir, name) for name in TABLES} == {
            name: v if v >= 0 else None for name, v in before.items()}, point
        result = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
        assert not result.nothing_new and result.rolled_back == dead_run, point
        assert snapshot(lake_dir) == reference, f"killed during {point}: the rerun did not converge"
        assert not (Path(lake_dir) / "_state" / "inflight.json").exists()


def test_a_stopped_run_says_so_and_rolls_back_at_once(spark, world, tmp_path, capfd, monkeypatch):
    """SIGTERM (a supervisor stopping `correlake run`) while publishing, here after the first
    MERGE: the run cancels its jobs, rolls back in its own process, says so in one line and
    exits 143; a second SIGTERM, during the rollback, waits for it to end. The next run converges."""
    landing, base, _, reference = world
    lake_dir = copy_lake(base, tmp_path / "term")
    before = snapshot(lake_dir)
    real, real_restore, signalled, restored = restate.merge, journal.deltars.restore, [], []

    def restate_then_stop(*args, **kwargs):
        real(*args, **kwargs)
        if not signalled:  # once, from the first of the writes in flight
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    def stop_again_while_restoring(lake, name, version):
        if not restored:  # once, before the rollback's first RESTORE
            os.kill(os.getpid(), signal.SIGTERM)
        restored.append(name)
        return real_restore(lake, name, version)

    monkeypatch.setattr(restate, "merge", restate_then_stop)
    monkeypatch.setattr(journal.deltars, "restore", stop_again_while_restoring)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    capfd.readouterr()
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir, "--max-quarantine-ratio", "1"]) == 143
    err = capfd.readouterr().err
    assert err.strip().splitlines()[-1].startswith("correlake: stopped by SIGTERM; nothing of a run"), err
    assert "Traceback" not in err and " ERROR " not in err, err[-3000:]
    assert signal.getsignal(signal.SIGTERM) is on_sigterm  # as before the run
    assert journal.unfinished_run(lake_dir) is None and not (Path(lake_dir) / "_state" / "lock").exists()
    assert len(restored) >= 1 and snapshot(lake_dir) == before
    monkeypatch.undo()
    pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    assert snapshot(lake_dir) == reference


def test_a_run_stopped_while_a_gate_is_checked_beside_a_stage_stops_whole(spark, world, tmp_path, capfd,
                                                                          monkeypatch):
    """SIGTERM while the silver stage computes and the bronze gate is checked beside it: the
    run stops as any stopped run does (exit 143, one line, no traceback), its gate's thread
    ended with it, and the lake is as it was."""
    landing, base, _, _ = world
    lake_dir = copy_lake(base, tmp_path / "gated")
    before = snapshot(lake_dir)
    real_check, real_plans = gates.check, {b: b.plan_scope for b in (driver.Driver, spark_backend.Spark)}
    checking, stopped = threading.Event(), threading.Event()

    def slow_check(*args, **kwargs):  # the bronze gate still running when silver is stopped
        checking.set()
        assert stopped.wait(60)
        return real_check(*args, **kwargs)

    def stopped_plan(backend, *args, **kwargs):  # silver's scope, on either backend
        assert checking.wait(60)
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # its handler raises in this thread, the main one
            return real_plans[type(backend)](backend, *args, **kwargs)
        finally:
            stopped.set()

    monkeypatch.setattr(gates, "check", slow_check)
    for backend in real_plans:
        monkeypatch.setattr(backend, "plan_scope", stopped_plan)
    capfd.readouterr()
    threads = set(threading.enumerate())
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir, "--max-quarantine-ratio", "1"]) == 143
    err = capfd.readouterr().err
    assert err.strip().splitlines()[-1].startswith("correlake: stopped by SIGTERM; nothing of a run"), err
    assert "Traceback" not in err and " ERROR " not in err, err[-3000:]
    assert not [t for t in set(threading.enumerate()) - threads if t.name.startswith("ThreadPoolExecutor")]
    assert journal.unfinished_run(lake_dir) is None and snapshot(lake_dir) == before


def test_a_run_stopped_after_its_publish_says_it_was_published(spark, world, tmp_path, capfd, monkeypatch):
    """SIGTERM during the clean-up after a publish (the collections of `release`): the
    run is in the lake, and the exit line says so instead of "nothing was published"."""
    landing, base, _, reference = world
    lake_dir = copy_lake(base, tmp_path / "late")
    real_release = pipeline.release

    def stop_then_release(session):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            real_release(session)

    monkeypatch.setattr(pipeline, "release", stop_then_release)
    capfd.readouterr()
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir, "--max-quarantine-ratio", "1"]) == 143
    err = capfd.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("correlake: stopped by SIGTERM after run ") and "was published" in last, err
    monkeypatch.undo()
    assert journal.unfinished_run(lake_dir) is None and snapshot(lake_dir) == reference
    assert pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0).nothing_new


def test_a_crashed_first_run_leaves_no_table_folder_behind(spark, tmp_path):
    """A table the dead run had begun to create (a `_delta_log` with no commit yet, which
    no Delta reader opens) is removed by the rollback, as are the ones it had created."""
    lake_dir = str(tmp_path / "lake")
    journal.begin(lake_dir, "dead-run")
    (Path(table_path(lake_dir, "messages")) / "_delta_log").mkdir(parents=True)
    (Path(table_path(lake_dir, "messages")) / "part-0.parquet").write_bytes(b"orphan")
    assert journal.unfinished_run(lake_dir) == "dead-run"
    assert journal.rollback(lake_dir) == "dead-run"
    assert not Path(table_path(lake_dir, "messages")).exists()
    assert journal.unfinished_run(lake_dir) is None


def test_two_runs_at_once_one_proceeds_the_other_waits_or_is_refused(spark, world, served, tmp_path, capsys):
    """The first run is another process's: the test session's driver, called by a `correlake run`.
    It is held at its bronze gate, its lock held, while the test holds the lake's Data Docs."""
    landing, base, _, reference = world
    lake_dir = copy_lake(base, tmp_path / "lake")
    lock, guard = Path(lake_dir) / "_state" / "lock", data_docs_dir(lake_dir).parent / "docs.guard"
    with gates.docs_guard(lake_dir):
        first = subprocess.Popen([sys.executable, "-m", "correlake.interfaces.cli", "run", "--landing", str(landing),
                                  "--lake", lake_dir, "--max-quarantine-ratio", "1"],
                                 env={**os.environ, "CORRELAKE_DRIVER": str(served[0])},
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 300
        while not flock_waiters(guard) and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)  # a blocked `flock` shows in the kernel's lock table only: looked at again each 50 ms
        assert flock_waiters(guard) == 1, "the first run is not waiting at its bronze gate"
        assert lock.exists(), first.communicate()[0]
        assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir]) == 2
        assert "another correlake run holds" in capsys.readouterr().err
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir, "--wait", "600"]) == 0
    assert first.wait() == 0, first.communicate()[0]
    assert "nothing new" in capsys.readouterr().out  # it waited, then found the work done
    assert snapshot(lake_dir) == reference


def test_staged_run_publishes_once_and_refuses_a_lake_that_moved(spark, world, tmp_path):
    landing, base, _, reference = world
    lake_dir = copy_lake(base, tmp_path / "lake")
    run_id = stepwise.prepare(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    for stage in ("bronze", "silver", "gold"):
        stepwise.compute(spark, lake_dir, run_id, stage)
        stepwise.check(spark, lake_dir, run_id, stage)
    stale = stepwise.prepare(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    stepwise.publish(spark, lake_dir, run_id)
    assert snapshot(lake_dir) == reference
    assert not (Path(staged_runs_dir(lake_dir)) / run_id).exists()
    with pytest.raises(LakeMoved, match="start a new one"):
        stepwise.publish(spark, lake_dir, stale)
    assert snapshot(lake_dir) == reference
    assert stepwise.prepare(spark, str(landing), lake_dir).nothing_new

