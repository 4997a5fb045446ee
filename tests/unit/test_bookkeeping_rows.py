"""The rows a run holds in Python, written with delta-rs (`lake/deltars.py`): gold/as_of's
row, the files a run read, its row of `_meta/runs`; no Spark."""

from __future__ import annotations

from deltalake import DeltaTable

from correlake.config import table_path
from correlake.lake import as_of, meta

T = 1_790_000_000_123  # epoch millis


def _history(lake: str, name: str) -> list[str]:
    return [h.get("userMetadata") for h in reversed(DeltaTable(table_path(lake, name)).history())]


def test_gold_as_of_holds_one_row_each_commit_naming_its_run(tmp_path):
    lake = str(tmp_path)
    as_of.record(lake, None, "r1")  # a lake with no record yet: the table, its row null
    assert as_of.current(lake) is None
    as_of.record(lake, T, "r2")
    as_of.record(lake, T + 3_600_000, "r3")
    rows = DeltaTable(table_path(lake, "as_of")).to_pyarrow_table().to_pylist()
    assert [r["run_id"] for r in rows] == ["r3"] and as_of.current(lake) == T + 3_600_000
    assert as_of.current(lake, version=1) == T  # exact to the millisecond, in the run's snapshot
    assert _history(lake, "as_of") == ["r1", "r2", "r3"]


def test_the_files_read_are_appended_with_no_empty_commit(tmp_path):
    lake = str(tmp_path)
    meta.record_ingested(lake, [], "r1")  # a first run that read no file: the table all the same
    meta.record_ingested(lake, [], "r2")  # no empty commit
    assert DeltaTable(table_path(lake, "ingested_files")).version() == 0
    meta.record_ingested(lake, [("messages", "/landing/a.jsonl", 10, T, 2, T + 5, "r3")], "r3")
    assert meta.ingested(lake) == {("/landing/a.jsonl", 10, T)}
    [row] = DeltaTable(table_path(lake, "ingested_files")).to_pyarrow_table().to_pylist()
    assert (row["lines"], int(row["_ingested_at"].timestamp() * 1000), row["_run_id"]) == (2, T + 5, "r3")
    assert _history(lake, "ingested_files") == ["r1", "r3"]


def test_a_runs_row_is_appended_and_read_back(tmp_path):
    lake = str(tmp_path)
    meta.record_run(lake, ("r1", T, T + 1000, 1, 5, 0, T - 10, T - 10, "{}"))
    meta.record_run(lake, ("r2", T + 2000, T + 3000, 2, 7, 1, T + 50, T + 50, "{}"))
    assert meta.last_event_time(lake) == T + 50 and meta.records_read(lake) == 12
    assert _history(lake, "runs") == ["r1", "r2"]


def test_a_runs_summary_carries_the_exporter_records_counts_of_such_a_run_only():
    import json

    from correlake.run.result import RunResult

    canonical = json.loads(RunResult("r1").runs_row()[-1])
    assert "mapped" not in canonical and "exporter_records" not in canonical
    engine = RunResult("r2", engine_records=10, ignored_records=6, mapped=3, unmapped=1, engine_correlations=2)
    summary = json.loads(engine.runs_row()[-1])
    assert {k: summary[k] for k in ("exporter_records", "ignored_records", "mapped", "unmapped",
                                    "engine_correlations", "engine_duplicates")} == {
        "exporter_records": 10, "ignored_records": 6, "mapped": 3, "unmapped": 1,
        "engine_correlations": 2, "engine_duplicates": 0}
