"""Random streams through the real pipeline against the reference model.

Many generated cases go through one run, each under its own tenant prefix and
position range; then the same records, split into files and runs that arrive in
shuffled order, must give the same gold (semantics rule 4), with a retried delivery in
the last run; `correlake rebuild` of that lake gives it again. The one run takes Spark's path, the split
runs the small-run path, both forced (`pipeline.run(path=…)`), so each path is checked
against the model and against the other. Every gold column is
compared (`helpers.assert_gold_equals`); the view `explanations` of the one run is checked
against the claims of each reason, stated on the model's gold (`explanations_model.py`).
The cases, the split and the shuffle all come from CORRELAKE_TEST_SEED (generators.SEED),
which the test prints: set it to replay a failure.
"""

from __future__ import annotations

import random
from contextlib import contextmanager

import pytest
from support.explanations_model import problems as explanation_problems
from support.generators import SEED, START_EVENTS, combine, generate_cases, shuffled_chunks
from support.helpers import (
    assert_gold_equals,
    assert_outbox_agrees,
    correlation_text,
    live_event_ids,
    project,
    read_gold,
    write_jsonl,
)
from support.reference_model import reference

from correlake.config import table_path
from correlake.contract.schemas import KEY_GROUPS
from correlake.interfaces import cli
from correlake.lake import catalog
from correlake.lake import tables as lake_tables
from correlake.run import pipeline, small_scope, stages

CASES = 60
START_EVENT_CASES = 40  # more of the per-key lock of message start events (rules 19-21)


def run_pipeline(spark, lake: str, root, runs: list[list[tuple[list, list]]], path: str) -> dict:
    """One pipeline run per item of `runs` on `path`, each over its own landing of one file pair per chunk."""
    for n, chunks in enumerate(runs):
        landing = root / f"landing{n}"
        for k, (messages, events) in enumerate(chunks):
            write_jsonl(landing / "messages" / f"m{k}.jsonl", messages)
            write_jsonl(landing / "workflow_events" / f"w{k}.jsonl", events)
        assert pipeline.run(spark, str(landing), lake, max_quarantine_ratio=0.0, path=path).path == path
    return read_gold(spark, lake)


@pytest.mark.slow
def test_pipeline_matches_reference_in_one_run_and_in_shuffled_runs(spark, tmp_path_factory):
    print(f"CORRELAKE_TEST_SEED={SEED}")
    cases = generate_cases(CASES) + generate_cases(START_EVENT_CASES, START_EVENTS)
    assert len(cases) >= 90
    messages, events = combine(cases)
    want = reference(messages, events)

    root = tmp_path_factory.mktemp("one")
    one_lake = str(root / "lake")
    one = run_pipeline(spark, one_lake, root, [[(messages, events)]], "spark")
    assert_gold_equals(one, want)
    # Explanations: one row per object of no correlation, each reason's claim true in the model
    catalog.register(spark, one_lake, ["explanations"])
    rows = [r.asDict() for r in spark.sql("SELECT * FROM explanations").collect()]
    assert len({r["reason"] for r in rows}) >= 6, sorted({r["reason"] for r in rows})  # the workload reaches many
    assert explanation_problems(spark, one_lake, want, events) == []  # every column, near misses too

    # The same records split at random into 2-4 runs, in shuffled order:
    # late records restate what earlier runs decided (rule 4). The last run also gets the
    # first run's chunk again, in files of other names (a retried delivery): it changes nothing.
    chunks = shuffled_chunks(messages, events, random.Random(SEED), 4)
    root = tmp_path_factory.mktemp("split")
    lake = str(root / "lake")
    with plans_compared() as compared:
        split = run_pipeline(spark, lake, root, [[c] for c in chunks[:-1]] + [[chunks[-1], chunks[0]]], "small")
    assert len(compared) == len(chunks) > 1
    assert_gold_equals(split, want)
    assert_same_gold(split, one)

    # The outbox: gold's correlations as live events in either lake; a correlation never
    # retracted has the same id whichever runs made it; a rebuild that changes no
    # correlation adds no event.
    outbox = assert_outbox_agrees(spark, lake)
    retracted = {correlation_text(e) for e in outbox if e["kind"] == "RETRACTED"}
    kept = {e["event_id"] for e in outbox if e["kind"] == "CORRELATED" and correlation_text(e) not in retracted}
    assert kept and kept <= live_event_ids(assert_outbox_agrees(spark, one_lake))

    before = lake_tables.version(table_path(lake, "outbox"))
    assert cli.main(["rebuild", "--lake", lake]) == 0  # silver and gold again, from bronze
    assert_same_gold(read_gold(spark, lake), one)
    assert lake_tables.version(table_path(lake, "outbox")) == before


@contextmanager
def plans_compared():
    """Each small run's plan (`small_scope.plan`, on the driver) checked against Spark's plan
    of the same run (`stages.spark_plan`): the same key group changes, touched keys and
    routed events, not only the same gold. Gives the list of runs compared."""
    compared = []
    planned = small_scope.plan

    def checked(run, new_messages, new_events, history, redeployed):
        small = planned(run, new_messages, new_events, history, redeployed)
        old = run.history if history else lambda name: None
        work = stages.spark_plan(run, new_messages, new_events, old, run.frame("silver_deployments"), redeployed)
        assert set(small.key_group_changes) == {tuple(r) for r in work.key_group_changes.select(*KEY_GROUPS.names).collect()}
        assert set(small.scope) == {tuple(r) for r in work.scope.select(*KEY_GROUPS.names).collect()}
        assert sorted(zip(small.routed_events["position"].to_pylist(), small.routed_events["label"].to_pylist())) == \
            sorted(tuple(r) for r in work.routed.select("position", "label").collect())
        compared.append(run.run_id)
        return small

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(small_scope, "plan", checked)
        yield compared


def assert_same_gold(got: dict, want: dict) -> None:
    for table in want:
        assert project(got[table], None) == project(want[table], None), f"gold/{table} differs"
