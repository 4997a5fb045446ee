"""The zeebe stream into bronze through the real pipeline (contract.md *Zeebe exporter
records*): one lake, two runs. Every line accounted for, each bad envelope quarantined with
its reason, a search hit read as its `_source` and its replay collapsed, identities by
(partitionId, position), a conflict quarantined, ignored kinds kept and counted, a gzip file,
a grown file; then the runs that mix kinds of input, refused before anything is written.
Expected values are worked out by hand from the contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.helpers import versions, write_jsonl
from support.lake_rows import table_rows as rows  # delta-rs: times as epoch millis

from correlake.config import MAX_LINE_BYTES, table_path
from correlake.interfaces import cli
from correlake.lake.preflight import MixedInput
from correlake.run import pipeline

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
COLUMNS = [("partition_id", "int"), ("position", "bigint"), ("key", "bigint"), ("timestamp", "timestamp"),
           ("record_type", "string"), ("value_type", "string"), ("intent", "string"), ("tenant_id", "string"),
           ("value", "string"), ("raw", "string"), ("_record_hash", "string"), ("_is_replay", "boolean"),
           ("_source_file", "string"), ("_line", "bigint"), ("_ingested_at", "timestamp"), ("_run_id", "string")]


def rec(partition: int, position: int, value_type: str = "JOB", intent: str = "CREATED", value: dict | None = None,
        record_type: str = "EVENT") -> dict:
    return {"partitionId": partition, "position": position, "key": 1000 * partition + position,
            "timestamp": T0 + position, "recordType": record_type, "valueType": value_type, "intent": intent,
            "value": value or {}}


def message(partition: int, position: int, key: str) -> dict:
    """A MESSAGE PUBLISHED record, as the mapping reads it."""
    return rec(partition, position, "MESSAGE", "PUBLISHED", {
        "name": "m", "correlationKey": key, "messageId": "", "timeToLive": 60000, "variables": {"n": 2**70},
        "tenantId": "", "deadline": T0 + position + 60000})


def hit(record: dict) -> str:
    """An Elasticsearch exporter's document of `record`, as a search returns it."""
    return json.dumps({"_index": "zeebe-record_message_8.5.0", "_id": f"{record['partitionId']}-{record['position']}",
                       "_score": 1.0, "_source": record})


def reordered(record: dict) -> str:
    """`record` with its fields and its value's in another order: equal as parsed JSON."""
    return json.dumps({**dict(reversed(record.items())), "value": dict(reversed(record["value"].items()))})


BAD = [b'{"partitionId": 1,', b"[1]", b"\xff\xfe", json.dumps({**rec(1, 50), "partitionId": 0}).encode(),
       json.dumps({**rec(1, 51), "partitionId": "1"}).encode(), json.dumps({**rec(1, 52), "partitionId": 1.5}).encode(),
       json.dumps({**rec(1, 53), "position": -1}).encode(),
       json.dumps({k: v for k, v in rec(1, 54).items() if k != "key"}).encode(),
       json.dumps({**rec(1, 55), "value": []}).encode(),
       json.dumps({**rec(1, 56), "timestamp": "2026-01-01T00:00:00Z"}).encode(),
       b'{"pad": "' + b"x" * MAX_LINE_BYTES + b'"}']
BAD_REASONS = ["invalid JSON: Expecting property name enclosed in double quotes", "invalid JSON: not an object",
               "non-UTF-8 bytes at offset 0", "partitionId out of range", "wrong type of partitionId",
               "wrong type of partitionId", "position out of range", "missing field key", "wrong type of value",
               "wrong type of timestamp", "line too long"]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """Run 1: a.jsonl (partition 1, and one record of partition 2), b.jsonl.gz, bad.jsonl;
    run 2: a.jsonl grown by a line, c.jsonl with replays of and a conflict with bronze."""
    root = tmp_path_factory.mktemp("engine_bronze")
    landing, lake_dir = root / "landing", str(root / "lake")
    zeebe = landing / "zeebe"
    a = write_jsonl(zeebe / "1" / "a.jsonl", [
        message(1, 10, "k1"),  # 1: used
        rec(1, 11),  # 2: a job: ignored
        rec(1, 12, "MESSAGE", "PUBLISH", record_type="COMMAND"),  # 3: a command: ignored
        "",  # 4: blank
        hit(message(1, 13, "k2")),  # 5: read as its _source: used
        reordered(message(1, 13, "k2")),  # 6: the same record, plain: a replay
        rec(1, 14, "VARIABLE", "CREATED", {"name": "x", "value": "1", "tenantId": "t"}),  # 7: ignored
        rec(1, 14, "VARIABLE", "UPDATED", {"name": "x", "value": "2", "tenantId": "t"}),  # 8: conflicts with 7
        rec(2, 10, "JOB", "COMPLETED"),  # 9: partition 2's position 10, not partition 1's: ignored
        rec(1, 15, "PROCESS_INSTANCE", "ELEMENT_ACTIVATING", {  # 10: an owner lookup: used
            "bpmnElementType": "SERVICE_TASK", "elementId": "task", "bpmnProcessId": "p", "version": 1,
            "processDefinitionKey": 5, "processInstanceKey": 99, "flowScopeKey": 99, "tenantId": "<default>"}),
    ])
    b = write_jsonl(zeebe / "2" / "b.jsonl", [rec(2, 11), message(2, 12, "k3")], gz=True)
    (zeebe / "bad.jsonl").write_bytes(b"\n".join(BAD) + b"\n")
    first = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    first_bronze = len(rows(lake_dir, "bronze_engine_records"))
    with open(a, "a") as f:
        f.write(json.dumps(message(1, 16, "k1")) + "\n")  # 11
    write_jsonl(zeebe / "3" / "c.jsonl", [message(1, 10, "k1"), rec(1, 11, "JOB", "FAILED"),
                                          hit(message(2, 12, "k3"))])
    second = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    return spark, landing, lake_dir, (first, second), first_bronze, {"a": str(a), "b": str(b)}


def test_every_line_is_in_bronze_or_quarantine_and_ignored_kinds_are_kept_and_counted(lake):
    _, _, lake_dir, (first, second), first_bronze, _ = lake
    assert (first.records_read, first.quarantined_total, first.replays) == (22, 12, 1)  # 9 + 2 + 11 lines
    assert (first.engine_records, first.ignored_records) == (9, 5)  # jobs, a command, a variable: never quarantined
    assert first_bronze == 10
    assert (second.records_read, second.quarantined_total, second.replays, second.engine_records) == (4, 1, 2, 1)
    assert len(rows(lake_dir, "bronze_engine_records")) == 13
    quarantine = rows(lake_dir, "quarantine")
    assert len(quarantine) == 13 and {r["stream"] for r in quarantine} == {"zeebe"}


def test_bronze_engine_records_has_the_fixed_columns_and_the_records_as_read(lake):
    spark, _, lake_dir, (first, _), _, files = lake
    schema = spark.read.format("delta").load(table_path(lake_dir, "bronze_engine_records")).schema  # no job
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == COLUMNS
    table = rows(lake_dir, "bronze_engine_records")
    by_line = {(Path(r["_source_file"]).name, r["_line"]): r for r in table}
    one = by_line[("a.jsonl", 1)]
    assert (one["partition_id"], one["position"], one["key"], one["record_type"], one["value_type"], one["intent"],
            one["tenant_id"], one["_is_replay"], one["_run_id"]) == (
        1, 10, 1010, "EVENT", "MESSAGE", "PUBLISHED", "<default>", False, first.run_id)
    assert one["timestamp"] == T0 + 10
    assert one["value"] == ('{"name":"m","correlationKey":"k1","messageId":"","timeToLive":60000,'
                            '"variables":{"n":1180591620717411303424},"tenantId":"","deadline":1767225660010}')
    assert by_line[("a.jsonl", 7)]["tenant_id"] == "t"
    assert (by_line[("a.jsonl", 9)]["partition_id"], by_line[("a.jsonl", 9)]["position"]) == (2, 10)
    assert sorted((r["partition_id"], r["position"]) for r in table if r["_source_file"] == files["b"]) == [
        (2, 11), (2, 12)]  # the gzip file


def test_a_search_hit_is_read_as_its_source_and_replays_collapse_by_partition_and_position(lake):
    _, _, lake_dir, _, _, files = lake
    table = rows(lake_dir, "bronze_engine_records")
    hit_row = next(r for r in table if r["_source_file"] == files["a"] and r["_line"] == 5)
    assert (hit_row["partition_id"], hit_row["position"], hit_row["_is_replay"]) == (1, 13, False)
    assert json.loads(hit_row["raw"])["_source"]["position"] == 13  # raw: the line as it came
    replays = sorted((Path(r["_source_file"]).name, r["_line"]) for r in table if r["_is_replay"])
    assert replays == [("a.jsonl", 6), ("c.jsonl", 1), ("c.jsonl", 3)]  # in the run, and against bronze
    hashed = sorted((Path(r["_source_file"]).name, r["_line"]) for r in table if r["_record_hash"] is not None)
    assert hashed == [("a.jsonl", 5), ("a.jsonl", 6), ("a.jsonl", 7), ("c.jsonl", 1), ("c.jsonl", 3)]  # came twice
    standing = [(r["partition_id"], r["position"]) for r in table if not r["_is_replay"]]
    assert len(standing) == len(set(standing)) == 10


def test_conflicts_and_bad_envelopes_are_quarantined_with_their_reason(lake):
    _, _, lake_dir, _, _, files = lake
    reasons = {(Path(r["_source_file"]).name, r["_line"]): r["reason"] for r in rows(lake_dir, "quarantine")}
    assert reasons.pop(("a.jsonl", 8)) == f"conflicting position 14 of partition 1: differs from the record at " \
                                          f"{files['a']}:7"
    assert reasons.pop(("c.jsonl", 2)) == f"conflicting position 11 of partition 1: differs from the record at " \
                                          f"{files['a']}:2"
    got = [reasons[("bad.jsonl", n)] for n in range(1, len(BAD) + 1)]
    assert [g[:len(want)] for g, want in zip(got, BAD_REASONS, strict=True)] == BAD_REASONS


def test_a_grown_file_gives_its_new_line_once(lake):
    _, _, lake_dir, _, _, files = lake
    lines = sorted(r["_line"] for r in rows(lake_dir, "bronze_engine_records") if r["_source_file"] == files["a"])
    assert lines == [1, 2, 3, 5, 6, 7, 9, 10, 11]


def test_the_summary_counts_the_exporter_records_and_the_ignored_ones(lake):
    from correlake.run.summary import summary

    assert "records read 22, replays 1, quarantined 12, exporter records 9 (ignored kinds 5)" in summary(lake[3][0])


def test_a_landing_of_both_kinds_or_of_the_other_kind_than_the_lake_is_a_usage_error_before_any_write(
        lake, tmp_path, capsys):
    spark, landing, lake_dir, *_ = lake
    before = versions(lake_dir)
    publish = {"position": 1, "name": "m", "correlation_key": "k", "published_at": T0}
    write_jsonl(landing / "messages" / "m.jsonl", [publish])
    assert cli.main(["run", "--landing", str(landing), "--lake", lake_dir]) == 2
    assert ("was built from Zeebe exporter records (zeebe/) and the landing brings canonical records"
            in capsys.readouterr().err)
    assert versions(lake_dir) == before
    other, fresh = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(other / "messages" / "m.jsonl", [publish])
    write_jsonl(other / "zeebe" / "z.jsonl", [rec(1, 1)])
    with pytest.raises(MixedInput, match="the landing holds both Zeebe exporter records .* and canonical records"):
        pipeline.run(spark, str(other), str(fresh))
    assert not list(fresh.rglob("_delta_log"))  # no table written
