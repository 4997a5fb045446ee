"""A Zeebe exporter record as a landing line (contract.md *Zeebe exporter records*): its
envelope read and checked, its `value` kept as JSON text (mapping it is silver's), and the
kinds of record that correlake reads, in one place for bronze's counts and silver's mapping.
"""

from __future__ import annotations

from correlake.contract.parsing import (
    INT32,
    MAX_MILLIS,
    MIN_MILLIS,
    BadRecord,
    Faults,
    compact_json,
    int_field,
    string_field,
    tenant_field,
    value_of,
)

EVENT = "EVENT"  # the only `recordType` read further
# (valueType -> its intents, None: any) the contract maps, audits, lists as unmapped, or reads to find
# an element's owner: every PROCESS_INSTANCE record. Other records are kept in bronze and ignored.
USED_KINDS = {"MESSAGE": ("PUBLISHED",), "PROCESS": ("CREATED", "DELETED"),
              "MESSAGE_START_EVENT_SUBSCRIPTION": ("CREATED", "CORRELATED"),
              "PROCESS_MESSAGE_SUBSCRIPTION": ("CREATING", "CORRELATED"), "PROCESS_INSTANCE": None}


def kinds_sql(kinds: dict[str, tuple[str, ...] | None]) -> str:
    """A Spark SQL condition on bronze/engine_records' columns: an EVENT of one of `kinds`."""
    def kind(value_type: str, intents: tuple[str, ...] | None) -> str:
        intent = "" if intents is None else f" AND intent IN ({', '.join(map(repr, intents))})"
        return f"(value_type = {value_type!r}{intent})"

    return f"(record_type = {EVENT!r} AND ({' OR '.join(kind(*k) for k in kinds.items())}))"


USED_SQL = kinds_sql(USED_KINDS)


def source(obj: dict) -> dict:
    """The record a line holds: a search hit's `_source` (an Elasticsearch or OpenSearch
    exporter's document), else the line itself."""
    found = obj.get("_source")
    return found if isinstance(found, dict) else obj


def _at_least(value: int | None, low: int, field: str) -> int | None:
    if value is not None and value < low:
        raise BadRecord(f"{field} out of range")
    return value


def _timestamp(obj: dict) -> int:
    millis = int_field(obj, "timestamp")
    if not MIN_MILLIS <= millis <= MAX_MILLIS:
        raise BadRecord("timestamp out of range")
    return millis


def _value(obj: dict) -> dict:
    value = value_of(obj, "value", True)
    if not isinstance(value, dict):
        raise BadRecord("wrong type of value")
    return value


def parse_engine_record(obj: dict) -> dict:
    """An exporter record's envelope (`source(obj)`), or BadRecord naming every fault of it;
    of its value only `tenantId` is read (missing, null or "": the default tenant)."""
    f = Faults()
    record = {
        "partition_id": f.read(lambda: _at_least(int_field(obj, "partitionId", limit=INT32), 1, "partitionId")),
        "position": f.read(lambda: _at_least(int_field(obj, "position"), 0, "position")),
        "key": f.read(lambda: int_field(obj, "key")),
        "timestamp": f.read(lambda: _timestamp(obj)),
        **{column: f.read(lambda field=field: string_field(obj, field)) for column, field in (
            ("record_type", "recordType"), ("value_type", "valueType"), ("intent", "intent"))},
    }
    if (value := f.read(lambda: _value(obj))) is not None:
        record.update(tenant_id=f.read(lambda: tenant_field(value, "tenantId", "value.tenantId")),
                      value=compact_json(value))
    f.raise_any()
    return record
