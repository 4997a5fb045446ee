"""Random streams through the real pipeline against the reference model.

Many generated cases go through one run, each under its own tenant prefix and
position range; then the same records, split into files and runs that arrive in
shuffled order, must give the same gold (semantics rule 4).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from correlake import pipeline
from generators import streams
from helpers import parsed, read_gold, relabel, write_jsonl
from reference_model import reference

CASES = 60
OFFSET = 1000
COMPARED = {
    "correlations": None,
    "subscriptions": None,
    "message_started_instances": None,
    "messages": ["message_key", "tenant_id", "status", "duplicate_of", "correlation_count"],
}


def combine(cases: list[dict]) -> tuple[list, list]:
    messages, events = [], []
    for i, case in enumerate(cases, start=1):
        messages += relabel(case["messages"], f"p{i:03d}", i * OFFSET)
        events += relabel(case["workflow_events"], f"p{i:03d}", i * OFFSET)
    return messages, events


def project(rows: list[dict], columns) -> list:
    return sorted((tuple(sorted((k, v) for k, v in r.items() if columns is None or k in columns)) for r in rows),
                  key=repr)


def assert_gold_equals(got: dict, want: dict) -> None:
    for table, columns in COMPARED.items():
        g, w = project(got[table], columns), project(want[table], columns)
        if g != w:
            tenants = sorted({dict(r)["tenant_id"] for r in set(g) ^ set(w)})
            raise AssertionError(f"gold/{table} differs from the reference model for tenants {tenants[:5]}:\n"
                                 f"  only in gold: {sorted(set(g) - set(w), key=repr)[:4]}\n"
                                 f"  only in model: {sorted(set(w) - set(g), key=repr)[:4]}")


def run_pipeline(spark, root, chunks: list[tuple[list, list]]) -> dict:
    lake = str(root / "lake")
    for n, (messages, events) in enumerate(chunks):
        landing = root / f"landing{n}"
        write_jsonl(landing / "messages" / "m.jsonl", messages)
        write_jsonl(landing / "workflow_events" / "w.jsonl", events)
        pipeline.run(spark, str(landing), lake, max_quarantine_ratio=0.0)
    return read_gold(spark, lake)


def generate_cases(n: int) -> list[dict]:
    """n cases drawn by Hypothesis (collected, so that they share one pipeline run)."""
    cases: list[dict] = []

    @settings(max_examples=n, phases=[Phase.generate], deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(streams())
    def collect(case):
        cases.append(case)

    collect()
    return cases


@pytest.mark.slow
def test_pipeline_matches_reference_in_one_run_and_in_shuffled_runs(spark, tmp_path_factory):
    cases = generate_cases(CASES)
    assert len(cases) >= 50
    messages, events = combine(cases)
    want = reference(parsed("messages", messages), parsed("workflow_events", events))

    one = run_pipeline(spark, tmp_path_factory.mktemp("one"), [(messages, events)])
    assert_gold_equals(one, want)

    # The same records split into 3 runs of random files, arriving in shuffled order.
    rnd = random.Random(len(messages))
    records = [("m", r) for r in messages] + [("w", r) for r in events]
    rnd.shuffle(records)
    cuts = sorted(rnd.sample(range(1, len(records)), 2))
    chunks = [records[:cuts[0]], records[cuts[0]:cuts[1]], records[cuts[1]:]]
    split = run_pipeline(spark, tmp_path_factory.mktemp("split"),
                         [([r for s, r in c if s == "m"], [r for s, r in c if s == "w"]) for c in chunks])
    assert_gold_equals(split, want)
