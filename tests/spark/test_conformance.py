"""The shared conformance scenarios, and ours in the same format, through the real pipeline.

Verbatim pass (`test_scenario_verbatim`): five shared scenarios (`VERBATIM`, which give
every gold table rows) exactly as written (the default tenant, the default quarantine
ratio), each in a landing and lake of its own, run by `correlake run` on the test
session's warm driver, on the path a small run takes (the engine in the driver process);
its gold, read with delta-rs (a reader other than correlake's Spark), must hold exactly
the `expected` rows on the listed columns, as the shared conformance README says, and its
quarantine none. It shows that the merged pass's relabelling hides nothing; a run per
scenario costs a first run's table creations each, so the merged pass is the one that
covers every scenario.

Merged pass (`test_scenario`, the cheap one, which also covers ours): all scenarios in
one run, on the Spark backend (forced: the run is small). Each scenario gets its own tenant
prefix, position range and time shift (so that the default as_of, the latest event time,
is the same instant for all of them); gold rows are mapped back and must match every
listed field exactly.

Quarantine (`test_scenario_quarantine`, on the merged pass's run): our scenarios with bad
or conflicting lines list them in `expected.quarantine`, each as `stream`, `_line` (its
line in the stream's file when the scenario is written as the README says, one file per
stream, from 1) and `reason` (its kind, `reason_kind`: the reason itself but for what
varies from line to line, such as the position and file of a conflict); the run's
quarantine must hold exactly those lines of the scenario (none when it lists none).

`data/conformance/` is a copy of the shared scenarios (it changes only when the spec
does); `data/scenarios/` holds ours, worked out by hand from semantics.md (each names
the rules it rests on in `note`): the rules' boundaries and interplay, quarantined
records among them (hence the run's quarantine ratio).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from support.helpers import merge_cases, project_row, read_gold, restore_row, write_landing
from support.lake_rows import table_rows

from correlake.config import GOLD_TABLES, table_path
from correlake.contract.reasons import reason_kind
from correlake.interfaces import cli

DATA = Path(__file__).parents[1] / "data"
SHARED = sorted(DATA.glob("conformance/*.json"))
# the verbatim pass's: a buffer drained FIFO to a non-interrupting boundary, a start queue drained
# under the per-key lock, tenants beside the default one, an exact replay and message-id duplicates
VERBATIM = [DATA / "conformance" / f"{name}.json" for name in (
    "s14_non_interrupting_boundary_three_messages", "s31_buffered_start_queue_drained", "s41_tenant_isolation",
    "x01_exact_replay_collapses", "s39_duplicate_message_id")]
SCENARIOS = SHARED + sorted(DATA.glob("scenarios/*.json"))
OFFSET = 100_000


@pytest.fixture(scope="module")
def gold(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("conformance")
    messages, events, layout = merge_cases([json.loads(p.read_text()) for p in SCENARIOS], OFFSET)
    write_landing(root / "landing", messages, events)
    with pytest.MonkeyPatch.context() as env:  # the Spark backend here, the driver backend in test_scenario_verbatim
        env.setenv("CORRELAKE_RUN_PATH", "spark")
        assert cli.main(["run", "--landing", str(root / "landing"), "--lake", str(root / "lake"),
                         "--max-quarantine-ratio", "0.5"]) == 0
    tables = read_gold(str(root / "lake"))
    tables["quarantine"] = table_rows(str(root / "lake"), "quarantine", lambda _: ["stream", "_line", "reason"])
    return tables, layout


@pytest.mark.parametrize("path", SCENARIOS, ids=[f"{p.parent.name}/{p.stem}" for p in SCENARIOS])
def test_scenario(gold, path):
    tables, layout = gold
    sc = json.loads(path.read_text())
    tag = f"c{SCENARIOS.index(path) + 1:02d}"
    offset, shift, _ = layout[tag]
    assert set(sc["expected"]) <= {*GOLD_TABLES, "quarantine"}, sc["name"]
    for table in GOLD_TABLES:
        expected = sc["expected"][table]
        rows = [restore_row(r, offset, shift) for r in tables[table] if r["tenant_id"].startswith(tag + "|")]
        columns = sorted({c for r in expected for c in r})
        got = sorted((project_row(r, columns, False) for r in rows), key=repr)
        want = sorted((project_row(r, columns, True) for r in expected), key=repr)
        assert got == want, f"{sc['name']}: gold/{table} differs"


def _quarantined(sc: dict, rows: list[dict], lines_before: dict) -> tuple[list, list]:
    """(got, want): the quarantine `rows` (stream, _line, reason) among the scenario's lines,
    which follow `lines_before` lines of each stream's file, as (stream, its line, reason
    kind); and what the scenario's `expected.quarantine` lists."""
    got = sorted((r["stream"], r["_line"] - lines_before[r["stream"]], reason_kind(r["reason"])) for r in rows
                 if 0 < r["_line"] - lines_before[r["stream"]] <= len(sc[r["stream"]]))
    want = sorted((q["stream"], q["_line"], q["reason"]) for q in sc["expected"].get("quarantine", []))
    return got, want


@pytest.mark.parametrize("path", SCENARIOS, ids=[f"{p.parent.name}/{p.stem}" for p in SCENARIOS])
def test_scenario_quarantine(gold, path):
    tables, layout = gold
    sc = json.loads(path.read_text())
    got, want = _quarantined(sc, tables["quarantine"], layout[f"c{SCENARIOS.index(path) + 1:02d}"][2])
    assert got == want, f"{sc['name']}: quarantine differs"


def _delta_rows(lake: str, table: str) -> list[dict]:
    """A lake table's rows read by delta-rs; timestamps as epoch millis."""
    from deltalake import DeltaTable

    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    return [{k: (v - epoch) // timedelta(milliseconds=1) if isinstance(v, datetime) else v for k, v in r.items()}
            for r in DeltaTable(table_path(lake, table)).to_pyarrow_table().to_pylist()]


@pytest.mark.slow
@pytest.mark.parametrize("path", VERBATIM, ids=[p.stem for p in VERBATIM])
def test_scenario_verbatim(served, path, tmp_path, monkeypatch):
    sc = json.loads(path.read_text())
    socket, log = served
    monkeypatch.setenv("CORRELAKE_DRIVER", str(socket))
    runs_before = log.read_text().count("correlake driver: run done")
    write_landing(tmp_path / "landing", sc["messages"], sc["workflow_events"])
    assert cli.main(["run", "--landing", str(tmp_path / "landing"), "--lake", str(tmp_path / "lake")]) == 0
    assert log.read_text().count("correlake driver: run done") == runs_before + 1  # on the driver
    assert sorted(sc["expected"]) == sorted(GOLD_TABLES)
    for table, expected in sc["expected"].items():
        columns = sorted({c for r in expected for c in r})
        got = sorted((project_row(r, columns, False) for r in _delta_rows(str(tmp_path / "lake"), table)), key=repr)
        want = sorted((project_row(r, columns, True) for r in expected), key=repr)
        assert got == want, f"{sc['name']}: gold/{table} differs"
    got, want = _quarantined(sc, _delta_rows(str(tmp_path / "lake"), "quarantine"),
                             {"messages": 0, "workflow_events": 0})
    assert got == want, f"{sc['name']}: quarantine differs"
