"""Random streams through the real pipeline against the reference model.

Many generated cases go through one run, each under its own tenant prefix and position
range, on the Spark backend; then the same records, split into 3-4 increments that arrive in
shuffled order, go through three lakes run by run: one forced on the driver backend, one
forced on Spark's (`pipeline.run(path=…)`), one on a path drawn per run (each path at
least once: it switches; until its first switch it has the runs of the forced lake of its
path, copied from it then). After every run each lake's gold and outbox must be the
reference model's of the records so far (semantics rule 4: late records restate what
earlier runs decided), every table of the three lakes must hold the same data
(`lake_rows`: run ids as run numbers, run times and summaries aside), and no CORRELATED
event may be RETRACTED without late input to explain it
(`outbox_model.unexplained_retractions`). The last increment also brings the first again,
in files of other names (a retried delivery): it changes nothing. At the end the split
gives the one run's gold, and `correlake rebuild` gives it again. Every gold column is
compared (`helpers.assert_gold_equals`); the views `explanations` and `near_misses` of the
one run must equal those the explanations model computes from the model's gold
(`explanations_model.py`). The cases, the split, the shuffle and the drawn paths all come
from CORRELAKE_TEST_SEED (generators.SEED), which the test prints: set it to replay a
failure.
"""

from __future__ import annotations

import random
import shutil
from contextlib import contextmanager

import pytest
from support.explanations_model import problems as explanation_problems
from support.generators import SEED, START_EVENTS, combine, generate_cases, shuffled_chunks
from support.helpers import assert_gold_equals, project, read_gold, write_jsonl
from support.lake_rows import differences, gold_of, lake_rows, outbox_of
from support.outbox_model import (
    assert_events_agree,
    assert_outbox_agrees,
    correlation_text,
    first_arrivals,
    live_event_ids,
    unexplained_retractions,
)
from support.reference_model import reference

from correlake.config import STREAMS, table_path
from correlake.contract.schemas import KEY_GROUPS
from correlake.interfaces import cli
from correlake.lake import catalog
from correlake.lake import tables as lake_tables
from correlake.run import pipeline
from correlake.run.backends import Driver, Spark

CASES = 60
START_EVENT_CASES = 40  # more of the per-key lock of message start events (rules 19-21)
PATHS = ("driver", "spark")


def landing(root, chunks: list[tuple[list, list]]) -> str:
    """A landing of one file pair per chunk (messages, workflow events)."""
    for k, chunk in enumerate(chunks):
        for stream, records in zip(STREAMS, chunk, strict=True):
            write_jsonl(root / stream / f"{stream[0]}{k}.jsonl", records)
    return str(root)


def run_on(spark, landing_dir: str, lake: str, path: str) -> str:
    """One run of the landing on `path` (forced); its run id."""
    result = pipeline.run(spark, landing_dir, lake, max_quarantine_ratio=0.0, path=path)
    assert result.path == path
    return result.run_id


@pytest.mark.slow
def test_pipeline_matches_reference_in_one_run_and_in_shuffled_runs(spark, tmp_path_factory):
    print(f"CORRELAKE_TEST_SEED={SEED}")
    cases = generate_cases(CASES) + generate_cases(START_EVENT_CASES, START_EVENTS)
    assert len(cases) >= 90
    messages, events = combine(cases)
    want = reference(messages, events)

    root = tmp_path_factory.mktemp("one")
    one_lake = str(root / "lake")
    run_on(spark, landing(root / "landing", [(messages, events)]), one_lake, "spark")
    one = read_gold(one_lake)
    assert_gold_equals(one, want)
    # Explanations: one row per object of no correlation, the model's first reason, related object and gap
    catalog.register(spark, one_lake, ["explanations"])
    rows = [r.asDict() for r in spark.sql("SELECT * FROM explanations").collect()]
    assert len({r["reason"] for r in rows}) >= 6, sorted({r["reason"] for r in rows})  # the workload reaches many
    assert explanation_problems(spark, one_lake, want, events) == []  # every column, near misses too

    # The same records split at random into 3-4 increments, in shuffled order, through three lakes
    rnd = random.Random(SEED)
    chunks = shuffled_chunks(messages, events, rnd, 4, min_chunks=3)
    increments = [[c] for c in chunks[:-1]] + [[chunks[-1], chunks[0]]]
    drawn = [*PATHS, *(rnd.choice(PATHS) for _ in increments[2:])]  # both paths, so the lake switches at least once
    rnd.shuffle(drawn)
    print(f"increments of {[sum(map(len, c)) for c in chunks]} records; the drawn lake's paths {drawn}")
    root = tmp_path_factory.mktemp("split")
    lakes = {name: str(root / name) for name in (*PATHS, "drawn")}
    numbers = {name: {} for name in lakes}  # each lake's run ids -> run numbers
    arrived = first_arrivals([{s: [r for c in increment for r in c[i]] for i, s in enumerate(STREAMS)}
                              for increment in increments])
    so_far = ([], [])
    switch = next(n for n in range(1, len(drawn)) if drawn[n] != drawn[n - 1])  # until it, the drawn lake is a forced one
    with plans_compared() as compared:
        for n, increment in enumerate(increments):
            landing_dir = landing(root / f"landing{n}", increment)
            if n == switch:  # the drawn lake: a copy of the forced lake whose runs it took so far
                shutil.copytree(lakes[drawn[n - 1]], lakes["drawn"])
                numbers["drawn"] = dict(numbers[drawn[n - 1]])
            for name, lake in lakes.items():
                if name != "drawn" or n >= switch:
                    numbers[name][run_on(spark, landing_dir, lake, drawn[n] if name == "drawn" else name)] = n
            for c in increment:
                so_far[0].extend(c[0])
                so_far[1].extend(c[1])
            tables = {name: lake_rows(lake, numbers[name]) for name, lake in lakes.items() if name != "drawn" or n >= switch}
            assert_run_agrees(n, tables, reference(*so_far), arrived)
    assert len(compared) == len(increments) + drawn[switch:].count("driver")
    split = gold_of(tables["driver"])
    assert_same_gold(split, one)

    # A correlation never retracted has the same id whichever runs made it; a rebuild that
    # changes no correlation adds no event.
    outbox = outbox_of(tables["driver"])
    retracted = {correlation_text(e) for e in outbox if e["kind"] == "RETRACTED"}
    kept = {e["event_id"] for e in outbox if e["kind"] == "CORRELATED" and correlation_text(e) not in retracted}
    assert kept and kept <= live_event_ids(assert_outbox_agrees(one_lake))

    lake = lakes["driver"]
    before = lake_tables.version(table_path(lake, "outbox"))
    assert cli.main(["rebuild", "--lake", lake]) == 0  # silver and gold again, from bronze
    assert_same_gold(read_gold(lake), one)
    assert lake_tables.version(table_path(lake, "outbox")) == before


def assert_run_agrees(n: int, tables: dict[str, dict], want: dict, arrived: list[set]) -> None:
    """After run `n`, each lake's gold and outbox are the reference model's (`want`), no
    retraction lacks late input to explain it, and every table holds the same data in each lake."""
    for name, rows in tables.items():
        try:
            gold = gold_of(rows)
            assert_gold_equals(gold, want)
            events = assert_events_agree(outbox_of(rows), gold["correlations"])
            assert unexplained_retractions(events, arrived) == []
        except AssertionError as failed:
            raise AssertionError(f"after run {n}, the {name} lake: {failed}") from failed
    first, *others = tables
    for name in others:
        assert differences(tables[name], tables[first]) == {}, f"after run {n}: the {name} lake against the {first}"


@contextmanager
def plans_compared():
    """Each small run's scope (`Driver.plan_scope`) checked against the Spark backend's scope
    of the same run (`Spark.plan_scope`): the same key group changes, touched keys and
    routed events, not only the same gold. Gives the list of runs compared."""
    compared = []
    planned = Driver.plan_scope

    def checked(self, new_messages, new_events, deployments, redeployed):
        small = planned(self, new_messages, new_events, deployments, redeployed)
        work = Spark(self.run).plan_scope(new_messages, new_events, deployments, redeployed)
        for frame in ("key_group_changes", "touched_keys"):
            assert set(rows(getattr(small, frame), KEY_GROUPS.names)) == set(rows(getattr(work, frame), KEY_GROUPS.names))
        assert rows(small.routed, ["position", "label"]) == rows(work.routed, ["position", "label"])
        compared.append(self.run.run_id)
        return small

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Driver, "plan_scope", checked)
        yield compared


def rows(frame, columns: list[str]) -> list[tuple]:
    return sorted(tuple(r) for r in frame.select(*columns).collect())


def assert_same_gold(got: dict, want: dict) -> None:
    for table in want:
        assert project(got[table], None) == project(want[table], None), f"gold/{table} differs"
