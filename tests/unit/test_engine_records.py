"""A Zeebe exporter record's envelope (contract.md *Zeebe exporter records*): what is read,
every wrong envelope a quarantine reason, a search hit read as its `_source`; and one kind
of input per lake."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from correlake.config import table_path
from correlake.contract.parsing import BadRecord
from correlake.contract.records import parse_line, record_hash
from correlake.lake.landing import listing, unread
from correlake.lake.preflight import MixedInput, require_one_kind

RECORD = {"partitionId": 1, "position": 7, "key": 2251799813685249, "timestamp": 1767225600000,
          "recordType": "EVENT", "valueType": "MESSAGE", "intent": "PUBLISHED", "sourceRecordPosition": 6,
          "value": {"name": "m", "correlationKey": "k", "tenantId": "t1", "big": 123456789012345678901234567890}}


def line(**changes) -> bytes:
    return json.dumps({**RECORD, **changes}).encode()


def reason(raw: bytes) -> str:
    with pytest.raises(BadRecord) as exc:
        parse_line("zeebe", raw)
    return str(exc.value)


def test_the_envelope_is_read_and_the_value_kept_as_compact_json_with_exact_integers():
    record = parse_line("zeebe", line())
    assert record == {"partition_id": 1, "position": 7, "key": 2251799813685249, "timestamp": 1767225600000,
                      "record_type": "EVENT", "value_type": "MESSAGE", "intent": "PUBLISHED", "tenant_id": "t1",
                      "value": '{"name":"m","correlationKey":"k","tenantId":"t1","big":123456789012345678901234567890}'}


@pytest.mark.parametrize("value", [{}, {"tenantId": None}, {"tenantId": ""}])
def test_a_missing_null_or_empty_tenant_id_is_the_default_tenant(value):
    assert parse_line("zeebe", line(value=value))["tenant_id"] == "<default>"


def test_a_key_of_minus_one_and_any_record_type_or_kind_are_envelopes():  # commands, rejections, jobs: ignored later
    record = parse_line("zeebe", line(key=-1, recordType="COMMAND_REJECTION", valueType="JOB", intent="X"))
    assert (record["key"], record["record_type"], record["value_type"]) == (-1, "COMMAND_REJECTION", "JOB")


@pytest.mark.parametrize("changes, expected", [
    ({"partitionId": 0}, "partitionId out of range"),
    ({"partitionId": "1"}, "wrong type of partitionId"),
    ({"partitionId": 1.5}, "wrong type of partitionId"),
    ({"partitionId": 2**31}, "partitionId out of range"),
    ({"position": -1}, "position out of range"),
    ({"position": "7"}, "wrong type of position"),
    ({"key": None}, "wrong type of key"),
    ({"key": True}, "wrong type of key"),
    ({"timestamp": "2026-01-01T00:00:00Z"}, "wrong type of timestamp"),
    ({"timestamp": 253402300800000}, "timestamp out of range"),
    ({"recordType": 1}, "wrong type of recordType"),
    ({"valueType": ""}, "empty valueType"),
    ({"value": []}, "wrong type of value"),
    ({"value": "{}"}, "wrong type of value"),
    ({"value": {"tenantId": 5}}, "wrong type of value.tenantId"),
])
def test_a_wrong_envelope_field_is_a_reason(changes, expected):
    assert reason(line(**changes)) == expected


def test_every_missing_field_is_named():
    assert reason(b'{"value": {}}') == ("missing field partitionId; missing field position; missing field key; "
                                        "missing field timestamp; missing field recordType; missing field valueType; "
                                        "missing field intent")
    assert reason(b'{"partitionId": 1, "position": 2, "key": 3, "timestamp": 4, "recordType": "EVENT", '
                  b'"valueType": "JOB", "intent": "CREATED"}') == "missing field value"


@pytest.mark.parametrize("raw, expected", [
    (b'{"partitionId": 1,', "invalid JSON: Expecting property name enclosed in double quotes"),
    (b"[1]", "invalid JSON: not an object"),
    (b"\xff{}", "non-UTF-8 bytes at offset 0"),
])
def test_a_line_that_is_not_a_json_object_is_a_reason(raw, expected):
    assert reason(raw).startswith(expected)


def test_a_search_hit_is_read_as_its_source_and_hashed_as_it():
    hit = json.dumps({"_index": "zeebe-record_message_8.5.0_2026-01-01", "_id": "1-7", "_score": 1.0,
                      "_source": {**RECORD, "value": dict(reversed(RECORD["value"].items()))}}).encode()
    assert record_hash("zeebe", hit) == record_hash("zeebe", line())  # equal as parsed JSON: a replay
    assert parse_line("zeebe", line(_source="not an object"))["position"] == 7  # not a hit: the line itself
    assert reason(json.dumps({"_source": {**RECORD, "value": None}}).encode()) == "wrong type of value"


def test_a_lake_reads_one_kind_of_input(tmp_path):
    lake = str(tmp_path / "lake")
    require_one_kind(lake, {"messages", "workflow_events"})  # a new lake: either kind
    require_one_kind(lake, {"zeebe"})
    with pytest.raises(MixedInput, match="the landing holds both Zeebe exporter records .* and canonical records"):
        require_one_kind(lake, {"messages", "zeebe"})
    write_deltalake(table_path(lake, "bronze_messages"), pa.table({"position": pa.array([], pa.int64())}))
    require_one_kind(lake, {"workflow_events"})
    require_one_kind(lake, set())  # nothing new: nothing to refuse
    with pytest.raises(MixedInput, match="was built from canonical records .* the landing brings Zeebe") as exc:
        require_one_kind(lake, {"zeebe"})
    assert exc.value.exit_code == 2


def test_a_landing_is_missing_only_the_stream_folders_of_its_kind(tmp_path):
    (tmp_path / "zeebe" / "1").mkdir(parents=True)
    (tmp_path / "zeebe" / "1" / "a.jsonl").write_text("{}\n")
    assert unread(tmp_path) == []  # no messages/ or workflow_events/ to miss
    assert [f.stream for f in listing(tmp_path)[0]] == ["zeebe"]
    (tmp_path / "zeebe" / "1" / "a.jsonl").rename(tmp_path / "messages.jsonl")
    (tmp_path / "zeebe" / "1").rmdir()
    (tmp_path / "zeebe").rmdir()
    (tmp_path / "messages").mkdir()
    assert unread(tmp_path) == ["workflow_events/ (no such folder)", "messages.jsonl"]  # never zeebe/
