"""A landing line as a record (contract.md): `parse_line` turns its raw bytes into a
normalised record dict, or raises `BadRecord` naming every fault of the line ("; " between
them), not only its first; `record_hash` gives an accepted line's content hash. Its values:
`parsing.py`."""

from __future__ import annotations

import hashlib

from correlake.config import DEFAULT_TTL_MS, ENGINE_STREAM
from correlake.contract.engine_records import parse_engine_record, source
from correlake.contract.enums import (
    BOUNDARY_EVENT,
    ELEMENT_LEFT,
    ELEMENT_TYPES,
    EVENT_SUBPROCESS,
    EVENT_TYPES,
    PROCESS_DEPLOYED,
    SUBSCRIPTION_OPENED,
)
from correlake.contract.parsing import (
    INT32,
    MAX_MILLIS,
    BadRecord,
    Faults,
    canonical_bytes,
    check_text,
    compact_json,
    decode,
    instance_key,
    int_field,
    normalise_key,
    parse_time,
    string_field,
    subscription_version,
    tenant_field,
    value_of,
)

READS_INTERRUPTING = (BOUNDARY_EVENT, EVENT_SUBPROCESS)  # the element types whose `interrupting` is read


def _ttl(obj: dict, published_at: int | None) -> int:
    ttl = int_field(obj, "ttl_ms", required=False, default=DEFAULT_TTL_MS)
    if ttl < 0:
        raise BadRecord("negative ttl_ms")
    if published_at is not None and published_at + ttl > MAX_MILLIS:
        raise BadRecord("ttl_ms out of range: deadline after year 9999")
    return ttl


def _variables(obj: dict) -> str:
    variables = value_of(obj, "variables", False)
    if variables is not None and not isinstance(variables, dict):
        raise BadRecord("wrong type of variables")
    return compact_json(variables or {})


def parse_message(obj: dict) -> dict:
    f = Faults()
    position, tenant = f.read(lambda: int_field(obj, "position")), f.read(lambda: tenant_field(obj))
    name = f.read(lambda: string_field(obj, "name"))
    key = f.read(lambda: normalise_key(value_of(obj, "correlation_key", True), "correlation_key"))
    published_at = f.read(lambda: parse_time(value_of(obj, "published_at", True), "published_at"))
    record = {"position": position, "tenant_id": tenant, "name": name, "correlation_key": key,
              "published_at": published_at, "ttl_ms": f.read(lambda: _ttl(obj, published_at)),
              "message_id": f.read(lambda: string_field(obj, "message_id", required=False, non_empty=False)) or None,
              "variables": f.read(lambda: _variables(obj))}
    f.raise_any()
    return record


def _kind(obj: dict) -> str:
    kind = value_of(obj, "type", True)
    if not isinstance(kind, str):
        raise BadRecord("wrong type of type")
    if kind not in EVENT_TYPES:
        raise BadRecord(f"unknown type {kind[:40]!r}")
    return kind


def _element_type(obj: dict) -> str:
    element_type = string_field(obj, "element_type")
    if element_type not in ELEMENT_TYPES:
        raise BadRecord(f"unknown element_type {element_type[:40]!r}")
    return element_type


def _interrupting(obj: dict, element_type: str | None) -> bool:
    if element_type not in READS_INTERRUPTING:
        return True
    value = value_of(obj, "interrupting", False)
    if value is not None and not isinstance(value, bool):
        raise BadRecord("wrong type of interrupting")
    return True if value is None else value


def _starts(obj: dict) -> list:
    starts = value_of(obj, "message_start_events", False)
    if starts is None:
        return []
    if not isinstance(starts, list) or not all(isinstance(s, str) for s in starts):
        raise BadRecord("wrong type of message_start_events")
    return starts


def parse_workflow_event(obj: dict) -> dict:
    f = Faults()

    def instance(field: str, required: bool = True) -> str | None:
        return f.read(lambda: None if (v := value_of(obj, field, required)) is None else instance_key(v, field))

    record = dict.fromkeys(("bpmn_process_id", "process_version", "process_instance_key", "element_instance_key",
                            "element_id", "element_type", "message_name", "correlation_key", "interrupting",
                            "message_start_events"))
    kind = f.read(lambda: _kind(obj))
    record.update(position=f.read(lambda: int_field(obj, "position")), tenant_id=f.read(lambda: tenant_field(obj)),
                  type=kind, timestamp=f.read(lambda: parse_time(value_of(obj, "timestamp", True), "timestamp")))
    if kind == PROCESS_DEPLOYED:
        record.update(bpmn_process_id=f.read(lambda: string_field(obj, "bpmn_process_id", non_empty=False)),
                      process_version=f.read(lambda: int_field(obj, "process_version", limit=INT32)),
                      message_start_events=f.read(lambda: _starts(obj)))
    elif kind == SUBSCRIPTION_OPENED:
        element_type = f.read(lambda: _element_type(obj))
        record.update(
            bpmn_process_id=f.read(lambda: string_field(obj, "bpmn_process_id", non_empty=False)),
            process_version=f.read(lambda: subscription_version(obj)),
            process_instance_key=instance("process_instance_key"),
            element_instance_key=instance("element_instance_key"),
            element_id=f.read(lambda: string_field(obj, "element_id", required=False, non_empty=False)),
            element_type=element_type,
            message_name=f.read(lambda: string_field(obj, "message_name")),
            correlation_key=f.read(lambda: normalise_key(value_of(obj, "correlation_key", True), "correlation_key")),
            interrupting=f.read(lambda: _interrupting(obj, element_type)),
        )
    elif kind == ELEMENT_LEFT:
        record.update(process_instance_key=instance("process_instance_key", required=False),
                      element_instance_key=instance("element_instance_key"))
    elif kind is not None:  # INSTANCE_ENDED
        record["process_instance_key"] = instance("process_instance_key")
    f.raise_any()
    return record


PARSERS = {"messages": parse_message, "workflow_events": parse_workflow_event, ENGINE_STREAM: parse_engine_record}


def _record(stream: str, raw: bytes) -> dict:
    """The JSON a line holds as a record: an exporter record's is the record it holds (a search hit's
    `_source`), which replays are compared as."""
    obj = decode(raw)
    obj = source(obj) if stream == ENGINE_STREAM else obj
    check_text(raw, obj)
    return obj


def parse_line(stream: str, raw: bytes) -> dict:
    """Return the normalised record or raise BadRecord."""
    return PARSERS[stream](_record(stream, raw))


def record_hash(stream: str, raw: bytes) -> str:
    """The content hash of an accepted line: equal for records equal as parsed JSON (contract.md
    *Replays*), which bronze compares only for an identity that comes twice."""
    return hashlib.sha256(canonical_bytes(_record(stream, raw))).hexdigest()[:32]
