"""The backends' contract (`run/backends/`): each method of the driver backend and of the
Spark backend, given the same input, gives the same output. The input is a run of
generated cases (the property generator's, a few tenants, start events among them) on a lake
that holds an earlier run of the same cases' other records, in shuffled order: the run's
bronze computed once, then each method asked of both backends of that one run. Gold against
the reference model is the property test's (`test_property_pipeline.py`)."""

from __future__ import annotations

import random
import shutil

import pytest
from pyspark.sql import functions as F
from support.generators import SEED, START_EVENTS, combine, generate_cases, shuffled_chunks
from support.helpers import write_jsonl

from correlake.config import STREAMS, table_path
from correlake.contract.ordering import may_share_a_line_column
from correlake.contract.schemas import GOLD_KEYS, KEY_GROUPS, SCOPE
from correlake.lake import deltars
from correlake.lake.restate import key_ranges
from correlake.run import pipeline, stepwise
from correlake.run.backends import Driver, Spark, base
from correlake.run.staged import StagedRun
from correlake.run.stages import STAGES
from correlake.run.store import MemoryStore, staged_run
from correlake.transforms import gold, silver


def rows(frame, columns: list[str] | None = None) -> list[tuple]:
    """The frame's rows (of `columns`), sorted: a list, so that a duplicate counts."""
    fetched = frame.select(*(columns or frame.columns)).toArrow()
    return sorted(deltars.tuples(fetched), key=repr)


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    """A run of the cases' second half, its bronze computed, on a lake holding the first half."""
    root = tmp_path_factory.mktemp("backends")
    messages, events = combine(generate_cases(8) + generate_cases(4, START_EVENTS))
    first, second = shuffled_chunks(messages, events, random.Random(SEED), 2, min_chunks=2)[:2]
    lake = str(root / "lake")
    for n, chunk in enumerate((first, second)):
        for stream, records in zip(STREAMS, chunk, strict=True):
            write_jsonl(root / f"landing{n}" / stream / "part.jsonl", records)
    pipeline.run(spark, str(root / "landing0"), lake, max_quarantine_ratio=1.0, path="spark")
    staged = StagedRun.prepare(spark, str(root / "landing1"), lake, lambda _: MemoryStore(), max_quarantine_ratio=1.0,
                               path="driver")
    STAGES[0].compute(staged)
    new_messages = silver.distinct_records(staged.frame("bronze_messages"))
    new_events = silver.workflow_events(silver.distinct_records(staged.frame("bronze_workflow_events")))
    deployments = staged.store.put("silver_deployments", silver.deployments(
        silver.deployed(new_events), staged.history("silver_deployments")))
    scopes = {backend: backend(staged).plan_scope(new_messages, new_events, deployments, staged.result.deployments > 0)
              for backend in (Driver, Spark)}
    yield staged, scopes, root
    staged.discard()


def test_both_plan_the_same_scope(run):
    _, scopes, _ = run
    small, large = scopes[Driver], scopes[Spark]
    assert small.touched_groups == large.touched_groups > 0
    for frame in ("key_group_changes", "touched_keys"):
        assert set(rows(getattr(small, frame), KEY_GROUPS.names)) == set(rows(getattr(large, frame), KEY_GROUPS.names))
    assert rows(small.message_records) == rows(large.message_records.select(*small.message_records.columns))
    assert rows(small.routed) == rows(large.routed.select(*small.routed.columns))


def test_both_accept_the_same_messages_and_the_engine_gives_the_same_rows(run, spark):
    staged, scopes, _ = run
    records = scopes[Spark].message_records
    accepted = {backend: backend(staged).accepted_messages(records) for backend in (Driver, Spark)}
    assert rows(accepted[Driver]) == rows(accepted[Spark]) != []
    touched = scopes[Spark].touched_keys
    labelled = accepted[Spark].join(touched.select(*SCOPE, "label"), SCOPE)
    engine_in = gold.engine_input(labelled, scopes[Spark].routed, ends_last=False)
    deployments = gold.deployments_by_tenant(staged.frame("silver_deployments"))
    out = {backend: backend(staged).run_engine(engine_in, deployments) for backend in (Driver, Spark)}
    assert rows(out[Driver]) == rows(out[Spark]) != []


def test_both_restate_refresh_and_append_alike(run, spark):
    """The touched keys, a refresh's rows outside them, the restating MERGE and an append, each
    on its own copy of the lake: the same tables after."""
    staged, scopes, root = run
    staged.store.put("touched_keys", scopes[Spark].touched_keys, checkpoint=False)
    touched = {backend: backend(staged).touched() for backend in (Driver, Spark)}
    assert set(touched[Driver].items()) == {((t, k), since) for t, k, since in rows(touched[Spark].keys)} != set()
    assert touched[Spark].ranges == key_ranges(touched[Driver])  # found once for every table
    current = spark.read.format("delta").load(table_path(staged.lake_dir, "subscriptions"))
    rows_of = current.join(scopes[Spark].touched_keys.select(*SCOPE), SCOPE, "left_semi").limit(3).localCheckpoint()
    new_rows = rows_of.withColumn("correlation_count", rows_of["correlation_count"] + 1).localCheckpoint()
    refreshed = {b: b(staged).refreshed(new_rows, current, touched[b], "opened_at") for b in (Driver, Spark)}
    assert rows(refreshed[Driver]) == rows(refreshed[Spark])
    tables = {}
    for backend in (Driver, Spark):
        lake = str(root / f"lake-{backend.name}")
        shutil.copytree(staged.lake_dir, lake)
        done = backend(type(staged)(spark, lake, staged.plan, staged.store))
        done.restate("subscriptions", new_rows, touched[backend], list(GOLD_KEYS["subscriptions"]))
        done.append(staged.frame("quarantine"), "quarantine")
        tables[backend] = {name: rows(spark.read.format("delta").load(table_path(lake, name)))
                           for name in ("subscriptions", "quarantine")}
    assert tables[Driver] == tables[Spark]


def test_both_give_the_touched_keys_correlations_and_past_outbox_events_alike(run, spark):
    """The lake's correlations of the touched keys whose lines hold no other key, and those keys:
    the same correlations and past events from both (the driver's by its delta-rs lookup), the
    past events a plain join's. (A key whose line may hold others: the driver asks the Spark
    backend; `test_outbox.py` and the property test cover those lines.)"""
    staged, scopes, _ = run
    keys = scopes[Spark].touched_keys.select(*SCOPE).where(~may_share_a_line_column(F.col("correlation_key")))
    correlations = staged.history("correlations").join(keys, SCOPE, "left_semi")
    found = {backend: backend(staged).outbox_of_touched(correlations, keys) for backend in (Driver, Spark)}
    assert [frame.columns for frame in found[Driver]] == [frame.columns for frame in found[Spark]]
    assert [rows(frame) for frame in found[Driver]] == [rows(frame) for frame in found[Spark]]
    past = staged.history("outbox").join(keys, SCOPE, "left_semi")
    assert rows(found[Driver][1]) == rows(past.select(*found[Driver][1].columns)) != []


def test_a_run_too_large_for_the_driver_plans_its_scope_again_on_spark_and_its_plan_says_so(run, spark, monkeypatch):
    """`auto` plans the run on the driver; with no room there (a bound of 1), the driver's scope
    raises TooLargeForDriver, the scope alone is planned again on the Spark backend (silver's
    records, which do not depend on the backend, made once), and the plan saved on disk (as
    the Airflow tasks read it) names Spark from then on."""
    staged, _, root = run
    lake = str(root / "lake-fallback")
    shutil.copytree(staged.lake_dir, lake)
    monkeypatch.setattr(base, "DRIVER_ROOM_RECORDS", 1)
    calls = []

    def counted(name, real):
        def call(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(silver, "workflow_events", counted("records", silver.workflow_events))
    for backend in (Driver, Spark):
        monkeypatch.setattr(backend, "plan_scope", counted(backend.name, backend.plan_scope))
    run_id = stepwise.prepare(spark, str(root / "landing1"), lake, max_quarantine_ratio=1.0)
    assert staged_run(lake, run_id).load_plan().backend == "driver"
    for stage in ("bronze", "silver"):
        stepwise.compute(spark, lake, run_id, stage)
    assert calls == ["records", "driver", "spark"]
    plan = staged_run(lake, run_id).load_plan()
    assert (plan.backend, plan.result.path) == ("spark", "spark")
    staged_run(lake, run_id).clear()
