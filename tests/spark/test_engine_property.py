"""The property test's exporter-record variant: generated cases (support/generators.py, one
seed) converted into Zeebe exporter records (support/zeebe_export.py: two partitions, one
unmapped record per mapped one), then split into shuffled runs of one lake, the process
definitions (`PROCESS` `CREATED` and their `MESSAGE_START_EVENT_SUBSCRIPTION` `CREATED`)
arriving last, runs on the driver backend and on the Spark backend by turns. After every run gold must be
the reference model's of what the mapping makes of the records so far
(`Export.canonical`: a subscription whose definition has not arrived is not open yet, a
deployment has the start events whose records arrived, an instance is named `msg-start:` once
its pairing arrived), every gold column compared, and `unmapped_engine_records` must list
exactly the subscriptions still waiting for their definition (NO_DEFINITION); the last run's
gold is the model's of the whole case, which the conversion keeps (tests/unit/test_zeebe_export.py).

The generator draws times on a 500 ms grid, so an instance or element end often shares a
millisecond with a message of its tenant; the exporter writes the end after the message and
the canonical order before (contract revision 4), so such ends are moved 1 ms later first
(`apart`): a case the conversion keeps."""

from __future__ import annotations

import random

import pytest
from support.generators import SEED, START_EVENTS, combine, generate_cases
from support.helpers import assert_gold_equals, read_gold, write_jsonl
from support.reference_model import millis, reference
from support.zeebe_export import convert, identity

from correlake.config import ENGINE_STREAM
from correlake.lake import catalog
from correlake.run import pipeline

DEFINITIONS = {("PROCESS", "CREATED"), ("MESSAGE_START_EVENT_SUBSCRIPTION", "CREATED")}
PATHS = ("spark", "driver", "spark")  # the runs' paths: the increments, then the definitions


def apart(case: dict) -> dict:
    """The case with each end that shares a millisecond with a message of its tenant 1 ms later."""
    published = {(m.get("tenant_id"), millis(m["published_at"])) for m in case["messages"]}
    events = [dict(e, timestamp=millis(e["timestamp"]) + 1)
              if e["type"] in ("ELEMENT_LEFT", "INSTANCE_ENDED") and (e.get("tenant_id"), millis(e["timestamp"]))
              in published else e for e in case["workflow_events"]]
    return dict(case, workflow_events=events)


@pytest.mark.slow
def test_exporter_records_in_shuffled_runs_definitions_last_match_the_reference(spark, tmp_path_factory):
    print(f"CORRELAKE_TEST_SEED={SEED}")
    messages, events = combine([apart(c) for c in generate_cases(24) + generate_cases(12, START_EVENTS)])
    export = convert(messages, events, partitions=2, noise=1, seed=SEED)
    rnd = random.Random(SEED)
    definitions = [r for r in export.records if (r["valueType"], r["intent"]) in DEFINITIONS]
    others = [r for r in export.records if (r["valueType"], r["intent"]) not in DEFINITIONS]
    rnd.shuffle(others)
    cut = rnd.randint(len(others) // 3, 2 * len(others) // 3)
    runs = [others[:cut], others[cut:], definitions]
    root = tmp_path_factory.mktemp("engine_property")
    lake, present = str(root / "lake"), set()
    for n, (records, path) in enumerate(zip(runs, PATHS, strict=True)):
        write_jsonl(root / "landing" / ENGINE_STREAM / f"run{n}.jsonl", records)
        result = pipeline.run(spark, str(root / "landing"), lake, max_quarantine_ratio=0.0, path=path)
        assert result.path == path
        present |= {identity(r) for r in records}
        catalog.register(spark, lake, ["unmapped_engine_records"])
        unmapped = {(r["partition_id"], r["position"]): r["why"] for r in spark.sql(
            "SELECT partition_id, position, why FROM unmapped_engine_records").collect()}
        try:
            assert_gold_equals(read_gold(lake), reference(*export.canonical(present)))
            assert unmapped == dict.fromkeys(export.waiting(present), "NO_DEFINITION")
        except AssertionError as failed:
            raise AssertionError(f"after run {n} ({path}): {failed}") from failed
    assert_gold_equals(read_gold(lake), reference(*export.canonical()))
