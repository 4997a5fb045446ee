"""What a run writes (`run/writes.py`), decided without Spark; the stage table; a staged plan, and
whether its gates are checked beside the next stage."""

from __future__ import annotations

import pytest

from correlake.config import GATES_BESIDE_MAX_BYTES, GOLD_TABLES, STAGE_NAMES, TABLES
from correlake.lake.landing import LandingFile
from correlake.run.result import RunResult
from correlake.run.stages import STAGES
from correlake.run.store import Plan
from correlake.run.writes import How, Write, plan_writes

EVERY = {name: 3 for name in TABLES} | {"bronze_engine_records": -1}  # a lake of the canonical streams
APPENDS = [Write(name, How.APPEND) for name in ("quarantine", "silver_workflow_events",
                                                 "bronze_messages", "bronze_workflow_events")]


def test_the_stage_table_has_the_names_the_dag_knows_without_spark():
    assert tuple(stage.name for stage in STAGES) == STAGE_NAMES


def test_an_increment_merges_first_then_appends():
    plan = plan_writes(EVERY, key_groups_changed=False)
    assert plan.writes == (
        Write("correlations", How.MERGE, ("message_key", "bpmn_process_id")),
        Write("subscriptions", How.MERGE, plan.writes[1].keys),
        Write("message_started_instances", How.MERGE, plan.writes[2].keys),
        Write("messages", How.MERGE, plan.writes[3].keys),
        Write("silver_messages", How.MERGE, ("message_key",)),
        Write("ingested_files", How.RECORD),
        *APPENDS)
    assert all(w.keys for w in plan.writes[:5])


def test_a_moved_as_of_refreshes_statuses_and_new_groups_and_deployments_are_written():
    plan = plan_writes(EVERY, deployments=2, key_groups_changed=True, as_of_moved=True, as_of_before=1000)
    assert Write("messages", How.REFRESH, ("message_key",), as_of_before=1000) in plan.writes
    assert Write("as_of", How.RECORD) in plan.writes
    assert Write("key_groups", How.MERGE, ("tenant_id", "correlation_key")) in plan.writes
    assert Write("silver_deployments", How.OVERWRITE) in plan.writes


def test_a_first_run_creates_every_table_it_restates():
    plan = plan_writes({name: -1 for name in TABLES}, key_groups_changed=False, as_of_moved=True)
    created = [w.table for w in plan.writes if w.how is How.CREATE]
    assert created == [*(t for t in GOLD_TABLES if t != "messages"), "messages", "silver_messages",
                       "key_groups", "outbox"]
    assert Write("as_of", How.RECORD) in plan.writes  # its row, the table created with it
    assert Write("silver_deployments", How.OVERWRITE) in plan.writes
    assert plan.writes[-len(APPENDS) - 1:-1] == tuple(APPENDS)


def test_the_outbox_is_created_once_then_appended_to_only_with_events():
    assert plan_writes(EVERY, outbox_events=0).writes[-1] == APPENDS[-1]  # no empty commit
    assert plan_writes(EVERY, outbox_events=5).writes[-1] == Write("outbox", How.APPEND)
    assert plan_writes({**EVERY, "outbox": -1}).writes[-1] == Write("outbox", How.CREATE)  # a lake from before it
    assert plan_writes(EVERY, rebuild=True, outbox_events=2).writes[-1] == Write("outbox", How.APPEND)


def test_a_rebuild_replaces_silver_and_gold_and_appends_nothing():
    plan = plan_writes(EVERY, rebuild=True)
    assert {w.how for w in plan.writes if w.table != "as_of"} == {How.OVERWRITE}
    assert set(plan.tables) == {"silver_messages", "silver_workflow_events", "silver_deployments", "key_groups",
                                *GOLD_TABLES, "as_of"}
    assert Write("as_of", How.RECORD) in plan.writes


def test_a_table_the_run_appends_nothing_to_is_not_written():
    plan = plan_writes(EVERY, appended_rows={"quarantine": 0, "bronze_messages": 3, "bronze_workflow_events": 0,
                                             "silver_workflow_events": 0})
    assert [w.table for w in plan.writes if w.how is How.APPEND] == ["bronze_messages"]
    assert Write("ingested_files", How.RECORD) in plan.writes  # the files read, whatever their lines
    first = plan_writes({**EVERY, "quarantine": -1}, appended_rows={"quarantine": 0})
    assert Write("quarantine", How.APPEND) in first.writes  # created, empty: a lake has every table


def test_bronze_engine_records_is_created_by_a_run_of_exporter_records_only():
    assert "bronze_engine_records" not in plan_writes(EVERY).tables  # a canonical run: the lake has no such table
    created = plan_writes(EVERY, appended_rows={"bronze_engine_records": 0}, engine_input=True)
    assert Write("bronze_engine_records", How.APPEND) in created.writes  # created, empty: all its lines quarantined
    kept = plan_writes({**EVERY, "bronze_engine_records": 3}, appended_rows={"bronze_engine_records": 0},
                       engine_input=True)
    assert "bronze_engine_records" not in kept.tables  # no empty commit


def test_gold_as_of_is_written_only_when_it_moves():
    assert "as_of" not in plan_writes(EVERY).tables
    assert Write("messages", How.MERGE, ("message_key",)) in plan_writes(EVERY).writes


def test_a_plan_staged_by_a_version_with_other_tables_is_refused_not_half_published():
    plan = Plan("r1", [], dict(EVERY), 0.01, None, RunResult("r1"))
    assert Plan.from_json(plan.to_json()) == plan
    older = Plan("r1", [], {name: v for name, v in EVERY.items() if name != "as_of"}, 0.01, None, RunResult("r1"))
    with pytest.raises(ValueError, match="staged by another version of correlake"):
        Plan.from_json(older.to_json())


def test_gates_are_checked_beside_the_next_stage_except_in_large_runs_and_rebuilds():
    def plan(*files, rebuild=False):
        landing = [LandingFile("messages", path, size, 0, "/") for path, size in files]
        return Plan("r", landing, {}, 0.0, None, RunResult("r", rebuild=rebuild), 10 ** 9)

    assert plan(("hour.jsonl", 400_000)).gates_beside  # an hourly increment, on any lake
    assert plan(("a.jsonl", GATES_BESIDE_MAX_BYTES // 2), ("b.jsonl", GATES_BESIDE_MAX_BYTES // 2)).gates_beside
    assert not plan(("a.jsonl", GATES_BESIDE_MAX_BYTES + 1)).gates_beside
    assert not plan(("a.jsonl.gz", GATES_BESIDE_MAX_BYTES // 5)).gates_beside  # its JSON is larger than the file
    assert not plan(rebuild=True).gates_beside  # every record of bronze
