"""The line parser: every quarantine reason and every normalisation of contract.md."""

from __future__ import annotations

import argparse
import ast
import json

import pytest

from correlake.contract import parsing, records
from correlake.contract.parsing import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_MILLIS,
    MIN_MILLIS,
    BadRecord,
    normalise_key,
    parse_time,
)
from correlake.contract.records import parse_line, record_hash
from correlake.interfaces.options import as_of

MSG = {"position": 1, "name": "m", "correlation_key": "k", "published_at": "2026-01-01T00:00:00Z"}
OPEN = {"position": 2, "type": "SUBSCRIPTION_OPENED", "timestamp": 1767225600000, "bpmn_process_id": "p",
        "process_instance_key": 1, "element_instance_key": "e", "element_type": "BOUNDARY_EVENT",
        "message_name": "m", "correlation_key": "k"}


def msg(**changes):
    return json.dumps({**MSG, **changes}).encode()


def bad(stream: str, raw: bytes) -> str:
    with pytest.raises(BadRecord) as exc:
        parse_line(stream, raw)
    return str(exc.value)


@pytest.mark.parametrize("value, expected", [
    ("abc", "abc"), ("", ""), (42, "42"), (-7, "-7"), (123.9, "123"), (1e3, "1000"), (-0.5, "0"),
    (12345678901234567890, "12345678901234567890"), (1.5e20, "150000000000000000000"),
])
def test_correlation_keys_normalise(value, expected):
    assert normalise_key(value, "correlation_key") == expected


def test_long_integers_are_read_exactly_up_to_a_limit():
    digits = "9" * 5000  # past Python's default limit of 4,300 digits (was "invalid JSON")
    raw = msg(variables={"big": 1}).replace(b'"big": 1', f'"big": {digits}'.encode())
    record = parse_line("messages", raw.replace(b'"k"', f"-{digits}".encode()))
    assert record["correlation_key"] == f"-{digits}" and record["variables"] == f'{{"big":{digits}}}'
    too_long = msg().replace(b'"k"', b"1" * (MAX_INT_DIGITS + 1))
    assert bad("messages", too_long) == (f"number out of range: an integer of {MAX_INT_DIGITS + 1} digits "
                                          f"(at most {MAX_INT_DIGITS})")


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}])
def test_correlation_key_wrong_types(value):
    assert bad("messages", msg(correlation_key=value)) == "wrong type of correlation_key"


@pytest.mark.parametrize("text, millis", [
    ("2026-01-01T00:00:00Z", 1767225600000),
    ("2026-01-01T01:00:00+01:00", 1767225600000),
    ("2025-12-31T19:00:00.123-05:00", 1767225600123),
    ("2026-01-01T00:00:00.123987Z", 1767225600123),  # digits beyond millis truncated
    ("2026-01-01T01:00+01:00", 1767225600000),  # seconds left out, as ISO-8601 allows
    (1767225600000, 1767225600000),
])
def test_times(text, millis):
    assert parse_time(text, "t") == millis


def test_message_defaults():
    record = parse_line("messages", msg(extra={"kept": "in raw"}))
    assert record["ttl_ms"] == 3_600_000 and record["tenant_id"] == "<default>"
    assert record["message_id"] is None and record["variables"] == "{}"
    assert parse_line("messages", msg(message_id="", tenant_id=""))["message_id"] is None
    nulls = parse_line("messages", msg(ttl_ms=None, message_id=None, variables=None, tenant_id=None))
    assert (nulls["ttl_ms"], nulls["message_id"], nulls["variables"], nulls["tenant_id"]) == (
        3_600_000, None, "{}", "<default>")
    assert len(record_hash("messages", msg(extra={"kept": "in raw"}))) == 32


def nested(levels: int, bottom: str = "1.0", field: str = "variables") -> bytes:
    """A message whose arrays and objects nest `levels` deep, the record itself the first level."""
    value = "[" * (levels - 2) + bottom + "]" * (levels - 2)
    return msg().replace(b'"name"', f'"{field}": {{"x": {value}}}, "name"'.encode())


def test_nesting_is_limited_and_a_deep_line_is_quarantined_not_a_crash():
    record = parse_line("messages", nested(MAX_DEPTH))
    assert record["variables"].count("[") == record["variables"].count("]") == MAX_DEPTH - 2
    assert parse_line("messages", nested(MAX_DEPTH, field="unread"))["variables"] == "{}"
    for levels, field in ((MAX_DEPTH + 1, "variables"), (MAX_DEPTH + 1, "unread"),  # a field no step reads
                          (600, "variables"),  # 1.0 at the bottom: a RecursionError stopped the run
                          (995, "variables")):  # the reader's own limit (also a RecursionError)
        assert bad("messages", nested(levels, field=field)) == (
            f"nested too deeply: arrays and objects more than {MAX_DEPTH} levels deep"), (levels, field)
    wide = msg(variables={"list": [{"a": [i]} for i in range(2 * MAX_DEPTH)]})  # many brackets, 5 levels
    assert json.loads(parse_line("messages", wide)["variables"])["list"][-1] == {"a": [2 * MAX_DEPTH - 1]}


def test_equal_as_parsed_json_is_the_same_record():
    a = record_hash("messages", b'{"position":1,"name":"m","correlation_key":"k","published_at":1}')
    b = record_hash("messages", b'{ "published_at": 1, "correlation_key": "k", "name": "m", "position": 1 }')
    assert a == b


@pytest.mark.parametrize("one, other, equal", [
    ({"a": 1}, {"a": 1.0}, True),  # a JSON number is a number, however spelt
    ({"a": [100, 0]}, {"a": [1e2, -0.0]}, True),
    ({"a": 1.5}, {"a": 1.50}, True),
    ({"a": 1}, {"a": 1.5}, False),
    ({"a": 12345678901234567890}, {"a": 12345678901234567890.0}, False),  # the double is another number
    ({"a": 1}, {"a": "1"}, False),
])
def test_replay_equality_is_equality_of_parsed_json(one, other, equal):
    hashes = [record_hash("messages", json.dumps({**MSG, "variables": v}).encode()) for v in (one, other)]
    assert (hashes[0] == hashes[1]) is equal


T0 = 1767225600000  # MSG's published_at


MESSAGE_REASONS = [
    (b"\xff\xfe{}", "non-UTF-8 bytes at offset 0"),
    (b'{"position": 1, "name": "m"', "invalid JSON"),
    (b"[1, 2]", "invalid JSON: not an object"),
    (b'{"position": NaN}', "invalid JSON"),
    (msg(position="1"), "wrong type of position"),
    (msg(position=True), "wrong type of position"),
    (msg(position=1.0), "wrong type of position"),
    (msg(name=""), "empty name"),
    (msg(ttl_ms=-1), "negative ttl_ms"),
    (msg(ttl_ms=1.5), "wrong type of ttl_ms"),
    (msg(published_at="2026-01-01T00:00:00"), "timestamp without offset in published_at"),
    (msg(published_at="yesterday"), "unparseable timestamp in published_at"),
    (msg(published_at="2026-02-30T00:00:00Z"), "unparseable timestamp in published_at"),
    (msg(published_at=1.5), "wrong type of published_at"),
    (msg(message_id=5), "wrong type of message_id"),
    (msg(variables=[1]), "wrong type of variables"),
    (msg(tenant_id=3), "wrong type of tenant_id"),
    (json.dumps({k: v for k, v in MSG.items() if k != "name"}).encode(), "missing field name"),
    (msg(variables={"x": "\ud800"}), "invalid JSON: unpaired surrogate escape"),  # was a crash
    (msg(name="\udfff"), "invalid JSON: unpaired surrogate escape"),
    (msg().replace(b'"name"', b'"v": 1e400, "name"'), "number out of range: 1e400"),  # was "Infinity" in gold
    (msg(published_at="9999-12-31T23:59:59-01:00"), "published_at out of range"),  # was an OverflowError
    (msg(published_at="0001-01-01T00:00:00+01:00"), "published_at out of range"),
    (msg(published_at="2026-01-01T00:00:00+0100"), "unparseable timestamp in published_at"),  # ±hh:mm only
    (msg(published_at=" 2026-01-01T00:00:00Z"), "unparseable timestamp in published_at"),
    (msg(position=-2**63 - 1), "position out of range"),
    (msg(published_at="2026-01-01T00:00:00+24:00"), "unparseable timestamp in published_at: offset out of range"),
    (msg(published_at="\u0662\u0660\u0662\u0666-01-01T00:00:00Z"), "unparseable timestamp in published_at"),
    (msg(variables={"a": None}).replace(b"null", b"[" * 5000 + b"]" * 5000), "nested too deeply"),
    (nested(MAX_DEPTH + 1), "nested too deeply"),  # one level past the limit: the walk, not the reader, finds it
    (msg(ttl_ms=MAX_MILLIS - T0 + 1), "ttl_ms out of range: deadline after year 9999"),
    (msg(published_at=MAX_MILLIS + 1), "published_at out of range"),  # epoch millis, past 9999-12-31
    (msg(published_at=MIN_MILLIS - 1), "published_at out of range"),  # before 0001-01-01
    (msg(published_at=2**63), "published_at out of range"),
    (msg(correlation_key=None), "wrong type of correlation_key"),  # null: present, not missing
    (msg().replace(b'"k"', b"1" * (MAX_INT_DIGITS + 1)), "number out of range: an integer of"),
]


@pytest.mark.parametrize("raw, reason", MESSAGE_REASONS)
def test_message_quarantine_reasons(raw, reason):
    assert bad("messages", raw).startswith(reason)


def test_times_and_deadlines_at_the_ends_of_the_range_are_accepted():
    """Year 1 to the last millisecond of 9999, for a time as for a deadline (`published_at + ttl_ms`)."""
    for changes in ({"published_at": MIN_MILLIS}, {"published_at": MAX_MILLIS, "ttl_ms": 0},
                    {"ttl_ms": MAX_MILLIS - T0}):
        record = parse_line("messages", msg(**changes))
        assert record["published_at"] + record["ttl_ms"] in (MIN_MILLIS + 3_600_000, MAX_MILLIS), changes


def ev(**changes):
    return json.dumps({**OPEN, **changes}).encode()


def test_subscription_defaults():
    record = parse_line("workflow_events", ev())
    assert record["process_version"] == 1 and record["interrupting"] is True
    assert record["process_instance_key"] == "1" and record["element_id"] is None
    record = parse_line("workflow_events", ev(element_type="RECEIVE_TASK", interrupting=False))
    assert record["interrupting"] is True  # only read for boundary events and event subprocesses
    record = parse_line("workflow_events", ev(interrupting=False))
    assert record["interrupting"] is False
    record = parse_line("workflow_events", ev(interrupting=None, tenant_id=""))
    assert record["interrupting"] is True and record["tenant_id"] == "<default>"
    deployed = {"position": 3, "type": "PROCESS_DEPLOYED", "timestamp": 1, "bpmn_process_id": "p", "process_version": 2}
    for starts in ({}, {"message_start_events": None}):
        assert parse_line("workflow_events", json.dumps({**deployed, **starts}).encode())[
            "message_start_events"] == []
    record = parse_line("workflow_events", ev(bpmn_process_id="", position=-2**63))
    assert record["bpmn_process_id"] == "" and record["position"] == -2**63  # only names must be non-empty


EVENT_REASONS = [
    (ev(type="SOMETHING"), "unknown type"),
    (ev(element_type="TASK"), "unknown element_type"),
    (ev(process_instance_key=True), "wrong type of process_instance_key"),
    (ev(element_instance_key=1.5), "wrong type of element_instance_key"),
    (ev(interrupting="yes"), "wrong type of interrupting"),
    (ev(message_name=""), "empty message_name"),
    (ev(process_version=None), "wrong type of process_version"),  # "missing: 1", unlike "missing or null"
    (ev(timestamp="2026-01-01 00:00"), "timestamp without offset in timestamp"),
    (json.dumps({"position": 3, "type": "PROCESS_DEPLOYED", "timestamp": 1, "bpmn_process_id": "p",
                 "process_version": 1, "message_start_events": "m"}).encode(), "wrong type of message_start_events"),
    (json.dumps({"position": 3, "type": "PROCESS_DEPLOYED", "timestamp": 1, "bpmn_process_id": "p"}).encode(),
     "missing field process_version"),
    (json.dumps({"position": 3, "type": "ELEMENT_LEFT", "timestamp": 1}).encode(),
     "missing field element_instance_key"),
    (json.dumps({"position": 3, "type": "INSTANCE_ENDED", "timestamp": 1}).encode(),
     "missing field process_instance_key"),
    (ev(type=5), "wrong type of type"),
    (ev(type=None), "wrong type of type"),
    (ev(type=["SUBSCRIPTION_OPENED"]), "wrong type of type"),
    (ev(timestamp=MAX_MILLIS + 1), "timestamp out of range"),
    (ev(process_version=2**31), "process_version out of range"),  # an INT column
]


@pytest.mark.parametrize("raw, reason", EVENT_REASONS)
def test_workflow_event_quarantine_reasons(raw, reason):
    assert bad("workflow_events", raw).startswith(reason)


PARSER_FILES = (parsing.__file__, records.__file__)


def _raise_sites() -> set[tuple[str, int]]:
    """The lines of parsing.py and records.py that raise a quarantine reason (`raise
    BadRecord(…)`, `raise _too_deep()`)."""
    return {(path, node.lineno) for path in PARSER_FILES
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())) if isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call) and getattr(node.exc.func, "id", None) in ("BadRecord", "_too_deep")}


def _raised_at(stream: str, raw: bytes) -> tuple[str, int]:
    """Where the `raise` that quarantined `raw` is (a line of one fault: its fault's)."""
    with pytest.raises(BadRecord) as exc:
        parse_line(stream, raw)
    fault = getattr(exc.value, "faults", [exc.value])[0]
    return [(tb.tb_frame.f_code.co_filename, tb.tb_lineno) for tb in _frames(fault.__traceback__)
            if tb.tb_frame.f_code.co_filename in PARSER_FILES][-1]


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_every_quarantine_reason_of_the_parser_has_a_case():
    """Each `raise` of a reason in parsing.py and records.py is reached by a case of MESSAGE_REASONS or
    EVENT_REASONS: a reason added there without a case here fails this test."""
    reached = {_raised_at("messages", raw) for raw, _ in MESSAGE_REASONS}
    reached |= {_raised_at("workflow_events", raw) for raw, _ in EVENT_REASONS}
    assert sorted(_raise_sites() - reached) == []


def test_only_lines_blank_in_jsons_sense_are_not_records():
    import io

    from correlake.transforms.bronze import parse_file

    rows = list(parse_file("messages", "f.jsonl", io.BytesIO(b"\n \t\r\n\x0c\n" + msg() + b"\n")))
    assert [(r["_line"], r.get("reason", "")[:12]) for r in rows] == [(3, "invalid JSON"), (4, "")]


@pytest.mark.parametrize("text, millis", [("1767225600000", 1767225600000), ("-5", -5),
                                          ("2026-01-01T00:00:00Z", 1767225600000)])
def test_as_of_option_takes_epoch_millis_or_iso_8601(text, millis):
    assert as_of(text) == millis


@pytest.mark.parametrize("text", ["\u0661\u0662", "--5", "2026-01-01T00:00:00", "+5"])
def test_as_of_option_refuses_what_is_neither(text):
    with pytest.raises(argparse.ArgumentTypeError):
        as_of(text)


def test_a_line_with_several_faults_is_quarantined_with_each_of_them():
    three = json.dumps({"position": "abc", "name": "m", "correlation_key": "k", "published_at": "yesterday",
                        "ttl_ms": -5}).encode()
    assert bad("messages", three) == "wrong type of position; unparseable timestamp in published_at; negative ttl_ms"
    event = json.dumps({"position": 1, "type": "SUBSCRIPTION_OPENED", "timestamp": "soon", "bpmn_process_id": "p",
                        "process_instance_key": 1.5, "element_instance_key": "e", "element_type": "TASK",
                        "message_name": "m", "correlation_key": "k"}).encode()
    assert bad("workflow_events", event) == ("unparseable timestamp in timestamp; unknown element_type 'TASK'; "
                                             "wrong type of process_instance_key")
    assert bad("workflow_events", b'{"position": 1, "type": 7}') == "wrong type of type; missing field timestamp"
