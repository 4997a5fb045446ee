"""Random streams through the real pipeline against the reference model.

Many generated cases go through one run, each under its own tenant prefix and
position range; then the same records, split into files and runs that arrive in
shuffled order, must give the same gold (semantics rule 4).
"""

from __future__ import annotations

import random

import pytest

from correlake import pipeline
from generators import START_EVENTS, combine, generate_cases
from helpers import assert_gold_equals, parsed, project, read_gold, write_jsonl
from reference_model import reference

CASES = 60
START_EVENT_CASES = 40  # more of the per-key lock of message start events (rules 19-21)


def run_pipeline(spark, lake: str, root, chunks: list[tuple[list, list]]) -> dict:
    for n, (messages, events) in enumerate(chunks):
        landing = root / f"landing{n}"
        write_jsonl(landing / "messages" / "m.jsonl", messages)
        write_jsonl(landing / "workflow_events" / "w.jsonl", events)
        pipeline.run(spark, str(landing), lake, max_quarantine_ratio=0.0)
    return read_gold(spark, lake)


@pytest.mark.slow
def test_pipeline_matches_reference_in_one_run_and_in_shuffled_runs(spark, tmp_path_factory):
    cases = generate_cases(CASES) + generate_cases(START_EVENT_CASES, START_EVENTS)
    assert len(cases) >= 90
    messages, events = combine(cases)
    want = reference(parsed("messages", messages), parsed("workflow_events", events))

    root = tmp_path_factory.mktemp("one")
    one = run_pipeline(spark, str(root / "lake"), root, [(messages, events)])
    assert_gold_equals(one, want)

    # The same records split into 2-4 runs of 1-3 random files each, in shuffled order:
    # late records restate what earlier runs decided (rule 4).
    rnd = random.Random(len(messages))
    records = [("m", r) for r in messages] + [("w", r) for r in events]
    rnd.shuffle(records)
    cuts = sorted(rnd.sample(range(1, len(records)), rnd.randint(1, 3)))
    chunks = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)])]
    root = tmp_path_factory.mktemp("split")
    lake = str(root / "lake")
    split = run_pipeline(spark, lake, root, [([r for s, r in c if s == "m"], [r for s, r in c if s == "w"])
                                             for c in chunks])
    assert_gold_equals(split, want)
    assert_same_gold(split, one)

    # A retried delivery (a chunk again, under new file names) changes nothing.
    again = run_pipeline(spark, lake, root / "retry", [([r for s, r in chunks[0] if s == "m"],
                                                       [r for s, r in chunks[0] if s == "w"])])
    assert_same_gold(again, one)

    # A rebuild from bronze gives the same gold.
    pipeline.run(spark, None, lake, rebuild=True)
    assert_same_gold(read_gold(spark, lake), one)


def assert_same_gold(got: dict, want: dict) -> None:
    for table in want:
        assert project(got[table], None) == project(want[table], None), f"gold/{table} differs"
