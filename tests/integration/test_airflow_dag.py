"""The Airflow DAGs `correlake_hourly`, `correlake_maintenance` and `correlake_delivery`: thin files that parse
fast without Spark, the expected shapes, `dag.test()` end to end equal to the CLI, a
failing gate that stops the run with gold unchanged, a dry run that publishes nothing,
maintenance that a run staged before it survives."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from support.helpers import sorted_gold, versions, write_jsonl

from correlake.config import GOLD_TABLES, table_path
from correlake.lake.tables import version
from correlake.run.store import staged_run, staged_runs_dir

DAG_FILES = [str(Path(__file__).resolve().parents[2] / "dags" / f"{name}.py")
             for name in ("correlake_hourly", "correlake_maintenance", "correlake_delivery")]
TASKS = ["prepare", "bronze", "gate_bronze", "silver", "gate_silver", "gold", "gate_gold", "publish", "stats"]

# what the DAG files may import beyond what `import airflow.sdk` loads: the standard library,
# Airflow's own modules and what they load lazily for the names the files use (croniter:
# the cron timetables; packaging: the task decorator's provider), and these correlake
# modules, of the standard library only
LIGHT = ("correlake", "correlake.config", "correlake.contract", "correlake.contract.parsing", "correlake.errors",
         "correlake.interfaces", "correlake.interfaces.airflow_dags")
AIRFLOW_LAZY = {"airflow", "croniter", "packaging"}

IMPORT_PROBE = f"""
import importlib.util, json, sys, time
start = time.perf_counter()
import airflow.sdk
sdk = time.perf_counter()
before = set(sys.modules)
for n, path in enumerate({DAG_FILES!r}):
    spec = importlib.util.spec_from_file_location(f"dag{{n}}", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
end = time.perf_counter()
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "great_expectations", "correlake", "pandas")
               and m not in {LIGHT!r})
new = sorted(set(sys.modules) - before)
print(json.dumps({{"total": end - start, "dag_file": end - sdk, "heavy": heavy, "new": new}}))
"""


def test_dag_files_import_only_the_standard_library_airflow_and_light_correlake_modules():
    """Deterministic, not timed: what makes a DAG file slow to parse is what it imports (how
    fast it parses is a benchmark's concern; the times are printed here for information)."""
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], check=True, capture_output=True, text=True).stdout
    probe = json.loads(out.strip().splitlines()[-1])
    print(f"DAG import: {probe['total']:.2f} s in all, {probe['dag_file']:.2f} s for the DAG files themselves")
    assert probe["heavy"] == []
    new = {m.split(".")[0] for m in probe["new"]} - set(sys.stdlib_module_names)
    assert new - {"correlake"} <= AIRFLOW_LAZY, new
    assert sorted(m for m in probe["new"] if m.split(".")[0] == "correlake") == sorted(LIGHT)


def test_dagbag_loads_the_dag_with_its_schedule_params_retries_and_assets(correlake_dag):
    """(The fixture loads dags/ with Airflow's DagBag and asserts no import errors.)"""
    from airflow.sdk import CronDataIntervalTimetable

    dag = correlake_dag
    assert [t.task_id for t in dag.topological_sort()] == TASKS
    for upstream, downstream in zip(TASKS, TASKS[1:]):
        assert dag.get_task(downstream).upstream_task_ids == {upstream}
    assert isinstance(dag.timetable, CronDataIntervalTimetable) and dag.timetable.expression == "0 * * * *"
    assert (dag.catchup, dag.max_active_runs) == (False, 1)
    assert set(dag.params) == {"as_of", "rebuild", "max_quarantine_ratio", "dry_run", "full_listing"}
    assert dag.dagrun_timeout == timedelta(hours=6)
    for task in dag.tasks:
        gate = task.task_id.startswith("gate_")
        assert task.retries == (0 if gate else 2) and task.execution_timeout == timedelta(hours=2)
        assert gate or task.retry_exponential_backoff > 1
    assert [a.name for a in dag.get_task("publish").outlets] == [f"correlake/gold/{t}" for t in GOLD_TABLES]


def test_as_of_is_the_param_else_a_scheduled_runs_interval_end_else_the_cli_default():
    from airflow.sdk.exceptions import AirflowFailException

    from correlake.interfaces.airflow_tasks import as_of_millis

    end = datetime(2026, 11, 2, 10, tzinfo=timezone.utc)
    assert as_of_millis(None, "scheduled", end) == int(end.timestamp() * 1000)
    assert as_of_millis(None, "manual", None) is None
    assert as_of_millis("2026-11-02T11:00:00+01:00", "scheduled", end) == int(end.timestamp() * 1000)
    with pytest.raises(AirflowFailException, match="as_of"):
        as_of_millis("2026-11-02T25:00:00Z", "manual", None)


# -- dag.test(): tasks run in this process, on the test session's SparkSession ---------------
def _states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def _gold_versions(lake: Path) -> dict[str, int]:
    return {t: version(table_path(lake, t)) for t in GOLD_TABLES}


def test_dag_test_runs_every_task_and_its_gold_equals_the_clis(spark, airflow_run, small_demo_gold):
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    run, _, lake = airflow_run
    assert set(_states(run).values()) == {"success"}
    assert sorted_gold(str(lake)) == small_demo_gold
    with create_session() as session:
        events = session.scalars(select(AssetEvent).where(AssetEvent.source_run_id == run.run_id)).all()
        assert sorted(e.extra["path"] for e in events) == sorted(table_path(lake, t) for t in GOLD_TABLES)


@pytest.fixture
def bad_landing_file(airflow_run):
    """A new landing file of 10 messages and 1 broken line (9 % quarantined); removed afterwards."""
    _, landing, _ = airflow_run
    good = [{"position": 900_000 + i, "tenant_id": "shop-eu", "name": "payment-reminder", "correlation_key": f"x-{i}",
             "published_at": "2026-11-02T11:30:00Z", "ttl_ms": 0} for i in range(10)]
    path = write_jsonl(landing / "messages" / "late" / "bad.jsonl", [*good, '{"position": 900100, "name": '])
    yield path
    path.unlink()


def test_a_failing_gate_fails_its_task_stops_the_run_and_leaves_gold_unchanged(correlake_dag, airflow_run,
                                                                                  bad_landing_file, caplog):
    _, _, lake = airflow_run
    before = _gold_versions(lake)
    run = correlake_dag.test(run_conf={"max_quarantine_ratio": 0.05})
    states = _states(run)
    assert str(run.state) == "failed"
    assert states["prepare"] == states["bronze"] == "success" and states["gate_bronze"] == "failed"
    assert {states[t] for t in TASKS[3:]} == {"upstream_failed"}
    assert _gold_versions(lake) == before
    assert list(Path(staged_runs_dir(str(lake))).iterdir()) == []
    assert "quarantined 1 of 11 records (9.09%) > max_quarantine_ratio 5.00%" in caplog.text  # the task's log


def test_a_param_the_dag_does_not_take_fails_the_run_before_anything_runs(correlake_dag, airflow_run,
                                                                          bad_landing_file, capfd):
    _, _, lake = airflow_run
    before = _gold_versions(lake)
    run = correlake_dag.test(run_conf={"dryrun": True})  # a typo of dry_run would publish for real
    states = _states(run)
    assert states["prepare"] == "failed" and {states[t] for t in TASKS[1:]} == {"upstream_failed"}
    assert ("unknown params ['dryrun']: this DAG takes ['as_of', 'dry_run', 'full_listing', 'max_quarantine_ratio', "
            in "".join(capfd.readouterr()))
    assert _gold_versions(lake) == before


class TaskInstance:  # what a task reads of its TaskInstance: prepare's XCom
    def __init__(self, xcom):
        self.xcom = xcom

    def xcom_pull(self, task_ids):
        return self.xcom


@pytest.fixture
def configured_lake(tmp_path, monkeypatch) -> Path:
    """The Airflow Variables' lake (and landing) in an allowed root of their own."""
    monkeypatch.setenv("CORRELAKE_ALLOWED_ROOT", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LANDING", str(tmp_path / "landing"))
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", str(tmp_path / "lake"))
    return tmp_path / "lake"


def test_a_task_cleared_alone_after_its_run_was_dropped_fails_without_retry(configured_lake):
    """A gate that failed dropped its staged run: clearing a later task alone cannot work."""
    from airflow.sdk.exceptions import AirflowFailException

    from correlake.interfaces import airflow_tasks

    ti = TaskInstance({"run_id": "20261124T000000Z-0000900d", "lake": str(configured_lake)})
    for call in (lambda c: airflow_tasks.stage(c, "silver"), lambda c: airflow_tasks.gate(c, "silver"),
                 airflow_tasks.publish):
        with pytest.raises(AirflowFailException, match="no longer staged .* clear this DAG run from 'prepare'"):
            call({"ti": ti, "params": {"dry_run": False}})


def test_a_tampered_xcom_deletes_nothing(configured_lake, tmp_path):
    """prepare's XCom is checked again before a task drops the staged run it names: a run id
    that is a path (`../..`), or a lake other than the configured one, fails the task for good
    and deletes nothing, though a staged run's plan is where they point."""
    from airflow.sdk.exceptions import AirflowFailException

    from correlake.interfaces import airflow_tasks

    other_lake, run_id = tmp_path / "other-lake", "20261124T000000Z-0000900d"
    victims = [tmp_path / "victim", other_lake / "_state" / "runs" / run_id]
    for folder in victims:
        folder.mkdir(parents=True)
        (folder / "plan.json").write_text("{}")  # what `has_plan` looks for
    (configured_lake / "_state" / "runs").mkdir(parents=True)
    for xcom in ({"run_id": "../../../victim", "lake": str(configured_lake)},
                 {"run_id": run_id, "lake": str(other_lake)}, {"run_id": run_id}, "not a run", None):
        with pytest.raises(AirflowFailException, match="prepare's XCom is not a run of the configured lake"):
            airflow_tasks.publish({"ti": TaskInstance(xcom), "params": {"dry_run": True}})  # a dry run drops it
    with pytest.raises(ValueError, match="not a run id"):  # and where a run is staged, for any caller
        staged_run(str(configured_lake), "../../../victim")
    assert all((folder / "plan.json").exists() for folder in victims)


def test_a_dry_run_passes_the_gates_and_publishes_nothing(correlake_dag, airflow_run, bad_landing_file):
    _, _, lake = airflow_run
    before = _gold_versions(lake)
    run = correlake_dag.test(run_conf={"dry_run": True, "max_quarantine_ratio": 0.5})
    states = _states(run)
    assert all(states[t] == "success" for t in TASKS[:7])
    assert states["publish"] == states["stats"] == "skipped"
    assert _gold_versions(lake) == before
    assert list(Path(staged_runs_dir(str(lake))).iterdir()) == []


def test_nothing_new_skips_the_run_and_a_dry_run_leaves_statuses_as_they_were(correlake_dag, airflow_run):
    _, _, lake = airflow_run
    before = _gold_versions(lake)
    run = correlake_dag.test(run_conf={"dry_run": True, "as_of": "2030-01-01T00:00:00Z"})
    states = _states(run)
    assert states["prepare"] == "success" and {states[t] for t in TASKS[1:]} == {"skipped"}
    assert _gold_versions(lake) == before


# -- correlake_maintenance ----------------------------------------------------------------
def test_the_maintenance_dag_runs_daily_between_two_hourly_runs(maintenance_dag):
    from airflow.sdk import CronTriggerTimetable

    dag = maintenance_dag
    assert [t.task_id for t in dag.tasks] == ["maintain"]
    assert isinstance(dag.timetable, CronTriggerTimetable) and dag.timetable.expression == "30 3 * * *"
    assert (dag.catchup, dag.max_active_runs, set(dag.params)) == (False, 1, {"retain_hours", "dry_run"})
    task = dag.get_task("maintain")
    assert (task.retries, task.retry_delay, task.execution_timeout) == (3, timedelta(minutes=10), timedelta(hours=2))


def test_maintenance_compacts_the_lake_and_a_run_staged_before_it_still_publishes(
        spark, maintenance_dag, airflow_run, tmp_path, monkeypatch, capfd):
    """The daily DAG on a copy of the hourly DAG's lake, while an hourly run waits between its
    gold gate and `publish`: maintenance commits to the tables it compacts (gold's among them)
    but changes no row, so that run publishes after it (a run's commits in between would make
    it refuse)."""
    from correlake.config import STAGE_NAMES
    from correlake.run import stepwise

    lake, landing = str(shutil.copytree(airflow_run[2], tmp_path / "lake")), tmp_path / "landing"
    write_jsonl(landing / "messages" / "late.jsonl", [
        {"position": 950_000, "tenant_id": "shop-eu", "name": "payment-reminder", "correlation_key": "late",
         "published_at": "2026-11-02T11:30:00Z"}])
    write_jsonl(landing / "workflow_events" / "late.jsonl", [])
    run_id = stepwise.prepare(spark, str(landing), lake)
    for stage in STAGE_NAMES:
        stepwise.compute(spark, lake, run_id, stage)
        stepwise.check(spark, lake, run_id, stage)
    before, versions_before = sorted_gold(lake), versions(lake)

    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", lake)
    capfd.readouterr()
    assert _states(maintenance_dag.test()) == {"maintain": "success"}
    out = capfd.readouterr().out
    assert f"correlake maintain {lake} — VACUUM retention 168 h" in out and "gold/messages" in out
    after = versions(lake)
    compacted = {name for name, v in versions_before.items() if after[name] > v}
    assert {"correlations", "messages", "subscriptions", "message_started_instances"} <= compacted
    assert sorted_gold(lake) == before

    stepwise.publish(spark, lake, run_id)
    published = spark.read.format("delta").load(table_path(lake, "messages")).where("message_key = 950000")
    assert [(r["correlation_key"], r["status"]) for r in published.collect()] == [("late", "BUFFERED")]


# -- correlake_delivery -------------------------------------------------------------------
def test_the_delivery_dag_runs_on_new_gold_and_every_five_minutes(delivery_dag, correlake_dag):
    from airflow.sdk import AssetOrTimeSchedule

    dag = delivery_dag
    assert [t.task_id for t in dag.tasks] == ["deliver"]
    assert isinstance(dag.timetable, AssetOrTimeSchedule) and dag.timetable.timetable.expression == "*/5 * * * *"
    published = {asset.name for asset in correlake_dag.get_task("publish").outlets}
    assert "correlake/gold/correlations" in published
    assert dag.timetable.asset_condition.name == "correlake/gold/correlations"
    assert (dag.catchup, dag.max_active_runs, set(dag.params)) == (False, 1, {"partitions", "max_seconds"})


def test_the_delivery_dag_sends_the_hourly_dag_s_correlations_to_the_connection_s_webhook(
        spark, delivery_dag, airflow_run, monkeypatch, capfd):
    """A webhook Connection from the environment, a real receiver: every gold correlation
    of the hourly DAG's lake arrives once; without a Connection the task skips."""
    from support.delivery_helpers import Receiver

    lake = str(airflow_run[2])
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", lake)
    monkeypatch.delenv("AIRFLOW_CONN_CORRELAKE_WEBHOOK", raising=False)
    assert _states(delivery_dag.test()) == {"deliver": "skipped"}
    receiver = Receiver()
    try:
        monkeypatch.setenv("AIRFLOW_CONN_CORRELAKE_WEBHOOK", json.dumps({"conn_type": "http", "host": receiver.url}))
        assert _states(delivery_dag.test()) == {"deliver": "success"}
        correlations = spark.read.format("delta").load(table_path(lake, "correlations")).count()
        assert correlations > 0 and len(receiver.applied) == correlations
    finally:
        receiver.close()


# -- what the DAGs refuse before any work -------------------------------------------------
def _files(lake: Path) -> dict[str, int]:
    return {str(p.relative_to(lake)): p.stat().st_mtime_ns for p in lake.rglob("*") if p.is_file()}


def test_maintenance_refuses_an_unknown_param_and_a_retention_under_168_hours(maintenance_dag, airflow_run,
                                                                              monkeypatch, capfd):
    """`dryrun` (a typo of dry_run) would VACUUM for real, and at 0 h; 0 h from a DAG conf
    at all would delete what older versions, readers and staged runs read: each fails the
    run, which touches no file of the lake."""
    _, _, lake = airflow_run
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", str(lake))
    before = _files(lake)
    cases = [({"retain_hours": 0, "dryrun": True}, "unknown params ['dryrun']: this DAG takes ['dry_run', "
                                                   "'retain_hours']"),
             ({"retain_hours": 0, "dry_run": False}, "param retain_hours: a VACUUM retention of 0 h is under Delta's "
                                                     "168 h"),
             ({"retain_hours": 167.9, "dry_run": True}, "run `correlake maintain --retain-hours H --force` by hand")]
    for conf, expected in cases:
        capfd.readouterr()
        assert _states(maintenance_dag.test(run_conf=conf)) == {"maintain": "failed"}, conf
        assert expected in "".join(capfd.readouterr()), conf
    assert _files(lake) == before


def test_variables_outside_the_allowed_root_and_bad_settings_fail_the_run(correlake_dag, maintenance_dag,
                                                                          airflow_run, monkeypatch, capfd):
    _, landing, lake = airflow_run
    before = _files(lake)
    defaults = {"retain_hours": None, "dry_run": False}
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", "/etc")
    capfd.readouterr()
    assert _states(maintenance_dag.test(run_conf=defaults)) == {"maintain": "failed"}
    assert "Airflow Variable correlake_lake: /etc is outside the allowed root " in "".join(capfd.readouterr())

    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", str(lake))
    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LANDING", "/")
    run = correlake_dag.test(run_conf={"as_of": None, "rebuild": False, "max_quarantine_ratio": None, "dry_run": True})
    states = _states(run)
    assert states["prepare"] == "failed" and {states[t] for t in TASKS[1:]} == {"upstream_failed"}
    assert "Airflow Variable correlake_landing: / is outside the allowed root " in "".join(capfd.readouterr())

    monkeypatch.setenv("AIRFLOW_VAR_CORRELAKE_LANDING", str(landing))
    monkeypatch.setenv("CORRELAKE_DRIVER_MEMORY", "lots")  # the settings, checked as the CLI does (config.validate)
    assert _states(maintenance_dag.test(run_conf=defaults)) == {"maintain": "failed"}
    assert "CORRELAKE_DRIVER_MEMORY: 'lots' is not a memory size" in "".join(capfd.readouterr())
    assert _files(lake) == before
