"""The reference model against the conformance scenarios, the shared ones and ours: the
oracle of the property tests is itself checked against the spec's worked examples and the
project's own (rows and columns as the conformance README says), with no correlake code
in between. The lines a scenario lists in `expected.quarantine` (bad or conflicting
records, which the model does not read) are left out of its input: by the contract they
have no effect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.helpers import iso_to_millis
from support.reference_model import reference

from correlake.config import GOLD_TABLES

DATA = Path(__file__).parents[1] / "data"
SCENARIOS = sorted(DATA.glob("conformance/*.json")) + sorted(DATA.glob("scenarios/*.json"))


def rows(table: list[dict], columns: list[str]) -> list[tuple]:
    return sorted((tuple(iso_to_millis(r[c]) if c.endswith(("_at", "deadline")) and isinstance(r[c], str)
                         else r[c] for c in columns) for r in table), key=repr)


def valid(sc: dict, stream: str) -> list[dict]:
    """The scenario's records of `stream` but the lines it lists as quarantined."""
    quarantined = {q["_line"] for q in sc["expected"].get("quarantine", []) if q["stream"] == stream}
    return [r for line, r in enumerate(sc[stream], start=1) if line not in quarantined]


@pytest.mark.parametrize("path", SCENARIOS, ids=[f"{p.parent.name}/{p.stem}" for p in SCENARIOS])
def test_the_model_gives_each_scenarios_expected_gold(path):
    sc = json.loads(path.read_text())
    got = reference(valid(sc, "messages"), valid(sc, "workflow_events"))
    for table in GOLD_TABLES:
        expected = sc["expected"][table]
        columns = sorted({c for r in expected for c in r}) or sorted({c for r in got[table] for c in r})
        assert rows(got[table], columns) == rows(expected, columns), f"{sc['name']}: gold/{table}"
