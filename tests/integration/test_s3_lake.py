"""The pipeline with its landing and its lake in S3-compatible object storage (conftest's
`s3`: moto's server on 127.0.0.1, one request at a time, so that its conditional writes
hold as S3's do): the gold of a local run, the bookkeeping, the journal's rollback, a
staged run whose frames live under the lake's URI, maintenance, and the readers without
Spark (the no-JVM check, delta-rs and DuckDB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.delivery_helpers import Receiver
from support.helpers import sorted_gold, versions

from correlake.config import PROJECT_ROOT, table_path
from correlake.delivery.events import ACKED
from correlake.errors import EXIT_GATE
from correlake.interfaces import cli
from correlake.lake import deltars, files, journal, meta, objectstore, tables
from correlake.run import stepwise, unchanged
from correlake.run.stages import STAGES
from correlake.run.store import staged_runs_dir


def upload(folder: Path, uri: str) -> None:
    """Every file under `folder` to the same relative keys under `uri`."""
    bucket, prefix = objectstore.split(uri)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        objectstore.client().upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")


def keys(uri: str) -> list[str]:
    return [entry.name for entry in objectstore.listing(uri)]


@pytest.fixture(scope="module")
def s3_lake(s3_spark, s3, small_demo):
    """The SMALL_DEMO landing uploaded, and the lake of one `correlake run` over it, both in
    the S3 server: (landing URI, lake URI). Later tests add to both."""
    landing, lake = s3.fresh("landing"), s3.fresh("lake")
    upload(small_demo[0], landing)
    assert cli.main(["run", "--landing", landing, "--lake", lake]) == 0
    return landing, lake


def test_a_run_on_object_storage_gives_the_gold_of_a_local_run(s3_spark, s3_lake, small_demo_gold):
    landing, lake = s3_lake
    assert sorted_gold(lake) == small_demo_gold
    ingested = meta.ingested(lake)  # delta-rs, on the same store
    assert len(ingested) == 7 and all(path.startswith(f"{landing}/") for path, _, _ in ingested)
    state = keys(f"{lake}/_state")
    assert state == ["discovery.json", "published.json"], state  # no lock, no journal left behind
    assert json.loads(files.state(lake).read("published.json"))["versions"] == versions(lake)


def test_a_second_run_with_nothing_new_answers_without_spark_and_writes_nothing(s3_lake, capsys):
    landing, lake = s3_lake
    before = versions(lake)
    assert unchanged.check(landing, lake).nothing_new
    assert cli.main(["run", "--landing", landing, "--lake", lake]) == 0
    assert "nothing new" in capsys.readouterr().out
    assert versions(lake) == before and keys(f"{lake}/_state") == ["discovery.json", "published.json"]


def test_a_failed_run_leaves_gold_as_it_was_and_a_crashed_one_is_rolled_back(s3_spark, s3_lake, capsys):
    landing, lake = s3_lake
    before = versions(lake)
    bucket, prefix = objectstore.split(landing)
    objectstore.client().put_object(Bucket=bucket, Key=f"{prefix}/messages/bad.jsonl", Body=b"{not json\n" * 5)
    assert cli.main(["run", "--landing", landing, "--lake", lake, "--max-quarantine-ratio", "0"]) == EXIT_GATE
    assert "Gold was left as it was" in capsys.readouterr().err
    assert versions(lake) == before
    # a run that began to write and failed: its writes undone (a RESTORE: one more version)
    runs = s3_spark.read.format("delta").load(table_path(lake, "runs"))
    count = runs.count()
    with pytest.raises(RuntimeError, match="crash"):
        with journal.journalled(s3_spark, lake, "crashed-run"):
            tables.append(runs.limit(1), lake, "runs", "crashed-run")
            assert runs.count() == count + 1
            raise RuntimeError("crash")
    assert versions(lake) == before | {"runs": before["runs"] + 2} and runs.count() == count
    assert journal.unfinished_run(lake) is None


def test_a_staged_run_keeps_its_frames_under_the_lake_uri(s3_spark, s3_lake, small_demo):
    """What the Airflow tasks do, each step possibly on another machine: nothing of the run on
    a local disk between the steps."""
    landing, lake = s3_lake
    bucket, prefix = objectstore.split(landing)
    objectstore.client().delete_object(Bucket=bucket, Key=f"{prefix}/messages/bad.jsonl")
    gold = sorted_gold(lake)
    first = min(small_demo[0].glob("messages/**/*.jsonl"))
    objectstore.client().upload_file(str(first), bucket, f"{prefix}/messages/again.jsonl")  # its records replayed
    run_id = stepwise.prepare(s3_spark, landing, lake, max_quarantine_ratio=1.0)  # its two bad lines too
    assert isinstance(run_id, str)
    for stage in STAGES:
        stepwise.compute(s3_spark, lake, run_id, stage.name)
        stepwise.check(s3_spark, lake, run_id, stage.name)
    staged = f"{staged_runs_dir(lake)}/{run_id}"
    assert "plan.json" in keys(staged) and any(k.startswith("bronze") for k in keys(staged)), keys(staged)
    result = stepwise.publish(s3_spark, lake, run_id)
    assert (result.files, result.records_read) == (1, sum(map(bool, first.read_text().splitlines()))) and keys(staged) == []
    assert sorted_gold(lake) == gold  # exact replays collapsed


def test_maintenance_and_readers_without_spark(s3_spark, s3_lake):
    _, lake = s3_lake
    assert cli.main(["maintain", "--lake", lake]) == 0
    gold = sorted_gold(lake)
    env = {**os.environ, "AWS_ENDPOINT_URL": os.environ["CORRELAKE_S3_ENDPOINT"], "AWS_ALLOW_HTTP": "true"}
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "examples" / "read_gold_duckdb.py"), lake,
                           "SELECT count(*) AS n FROM gold_correlations", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"n": len(gold["correlations"])}


def test_a_delivery_pass_from_a_lake_in_object_storage(s3_lake):
    """`correlake deliver` without Spark: the outbox and its own tables through delta-rs, its
    lock and marks as objects of the lake's _state."""
    _, lake = s3_lake
    events = deltars.table(lake, "outbox").to_pyarrow_table(columns=["event_id"])["event_id"].to_pylist()
    receiver = Receiver()
    try:
        assert cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", receiver.url]) == 0
    finally:
        receiver.close()
    assert sorted(receiver.applied) == sorted(events) and len(events) > 100
    state = deltars.table(lake, "delivery_state").to_pyarrow_table(columns=["status"])["status"].to_pylist()
    assert set(state) == {ACKED} and len(state) == len(events)
    assert "delivery.json" in keys(f"{lake}/_state") and "delivery.lock" not in keys(f"{lake}/_state")
