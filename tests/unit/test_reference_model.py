"""The reference model against the shared conformance scenarios: the oracle of the
property tests is itself checked against the spec's worked examples (rows and columns as
the conformance README says), with no correlake code in between."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.helpers import iso_to_millis
from support.reference_model import reference

SCENARIOS = sorted((Path(__file__).parents[1] / "data" / "conformance").glob("*.json"))


def rows(table: list[dict], columns: list[str]) -> list[tuple]:
    return sorted((tuple(iso_to_millis(r[c]) if c.endswith(("_at", "deadline")) and isinstance(r[c], str)
                         else r[c] for c in columns) for r in table), key=repr)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_the_model_gives_each_scenarios_expected_gold(path):
    sc = json.loads(path.read_text())
    got = reference(sc["messages"], sc["workflow_events"])
    for table, expected in sc["expected"].items():
        columns = sorted({c for r in expected for c in r}) or sorted({c for r in got[table] for c in r})
        assert rows(got[table], columns) == rows(expected, columns), f"{sc['name']}: gold/{table}"
