"""The values of one landing line (contract.md), pure Python: its JSON decoded, its
fields read and normalised (times, keys, numbers), each fault a `BadRecord` naming it.
A whole line as a record: `records.py`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from correlake.config import DEFAULT_TENANT

# contract.md *Times*: a date-time (seconds may be left out, as ISO-8601 allows:
# `2026-01-01T08:30Z`) with an explicit offset (also the DAG's `as_of` form)
_DATE_TIME = r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
ISO_WITH_OFFSET = _DATE_TIME + r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
_ISO = re.compile(ISO_WITH_OFFSET, re.ASCII)
_WITHOUT_OFFSET = re.compile(_DATE_TIME, re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MAX_MILLIS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MIN_MILLIS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
INT64 = 2**63 - 1
INT32 = 2**31 - 1
# JSON integers are read exactly up to this many digits (a correlation key's "exact decimal
# digits", a big number in variables). Python converts between int and text only up to 4,300
# digits, a guard against the conversions' quadratic cost: ~0.15 s a line at this limit
# (raised by `_parse_int` when a line has such an integer).
MAX_INT_DIGITS = 100_000
# Arrays and objects within each other at most this deep. Python's JSON reader and writer,
# and the step that reads 1.0 as 1, recurse once or twice per level in a stack of ~1,000
# frames: without a limit well below that, a deep line would stop the run instead of going
# to quarantine. (serde_json allows 128 levels, Jackson 1,000.)
MAX_DEPTH = 256
_MISSING = object()


class BadRecord(ValueError):
    """A line that goes to quarantine; the message is the reason."""


class Faults:
    """Every fault of one line: each field is read on its own, so that the quarantine reason
    names them all, not only the first (`faults`: each fault as raised, with its traceback)."""

    def __init__(self):
        self.faults: list[BadRecord] = []

    def read(self, read: Callable[[], object]):
        """`read()`, or None with its fault noted."""
        try:
            return read()
        except BadRecord as fault:
            self.faults.append(fault)
            return None

    def raise_any(self) -> None:
        if self.faults:
            error = BadRecord("; ".join(map(str, self.faults)))
            error.faults = self.faults
            raise error


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


class _Floats:
    """The decoder's `parse_float`: finite floats only; notes whether a line had an
    integral one (`1.0`, `1e2`), which equals an integer as parsed JSON (see `canonical_bytes`)."""

    integral = False

    def __call__(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):  # 1e400: no JSON text can hold it again
            raise BadRecord(f"number out of range: {text[:40]}")
        if value.is_integer():
            self.integral = True
        return value


def _parse_int(text: str) -> int:
    """`_EXACT`'s `parse_int`: exact, up to MAX_INT_DIGITS digits."""
    if (digits := len(text) - text.startswith("-")) > MAX_INT_DIGITS:
        raise BadRecord(f"number out of range: an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    if digits > sys.get_int_max_str_digits() > 0:  # Python's guard, 4,300 digits by default
        sys.set_int_max_str_digits(MAX_INT_DIGITS)
    return int(text)


def _integral_floats_as_ints(value):
    if isinstance(value, dict):
        return {k: _integral_floats_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral_floats_as_ints(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_time(value, field: str) -> int:
    """ISO-8601 with offset, or integer epoch millis -> epoch millis (UTC)."""
    if _is_int(value):
        if not MIN_MILLIS <= value <= MAX_MILLIS:
            raise BadRecord(f"{field} out of range")
        return value
    if isinstance(value, str):
        m = _ISO.fullmatch(value)
        if m:
            year, month, day, hour, minute, second, frac, zulu, sign, oh, om = m.groups()
            try:
                local = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0),
                                 tzinfo=timezone.utc)
            except ValueError as exc:
                raise BadRecord(f"unparseable timestamp in {field}: {exc}") from None
            if not zulu and (int(oh) > 23 or int(om) > 59):
                raise BadRecord(f"unparseable timestamp in {field}: offset out of range")
            offset = timedelta(0) if zulu else timedelta(hours=int(oh), minutes=int(om))
            if sign == "-":
                offset = -offset
            millis = int((frac or "0")[:3].ljust(3, "0"))
            delta = local - _EPOCH - offset  # timedeltas: no overflow at the calendar's ends
            result = (delta.days * 86_400 + delta.seconds) * 1000 + millis
            if not MIN_MILLIS <= result <= MAX_MILLIS:
                raise BadRecord(f"{field} out of range")
            return result
        if _WITHOUT_OFFSET.fullmatch(value):
            raise BadRecord(f"timestamp without offset in {field}")
        raise BadRecord(f"unparseable timestamp in {field}")
    raise BadRecord(f"wrong type of {field}")


def instance_key(value, field: str) -> str:
    """Instance keys: strings as is, JSON integers as their decimal digits."""
    if isinstance(value, str):
        return value
    if _is_int(value):
        return str(value)
    raise BadRecord(f"wrong type of {field}")


def normalise_key(value, field: str) -> str:
    """Correlation key: as an instance key, and other numbers truncated to integer digits."""
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value))  # int() truncates toward zero
    return instance_key(value, field)


def value_of(obj: dict, field: str, required: bool):
    value = obj.get(field, _MISSING)
    if value is _MISSING:
        if required:
            raise BadRecord(f"missing field {field}")
        return None
    if value is None and required:
        raise BadRecord(f"wrong type of {field}")  # null is a JSON type, not an absent field
    return value


def string_field(obj: dict, field: str, required: bool = True, non_empty: bool = True):
    value = value_of(obj, field, required)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRecord(f"wrong type of {field}")
    if non_empty and value == "":
        raise BadRecord(f"empty {field}")
    return value


def int_field(obj: dict, field: str, required: bool = True, default=None, limit: int = INT64):
    value = value_of(obj, field, required)
    if value is None:
        return default
    if not _is_int(value):
        raise BadRecord(f"wrong type of {field}")
    if not -limit - 1 <= value <= limit:
        raise BadRecord(f"{field} out of range")
    return value


def subscription_version(obj: dict) -> int:
    """Missing: 1 (contract.md); null, unlike the fields whose default covers it, is a wrong type."""
    if obj.get("process_version", _MISSING) is None:
        raise BadRecord("wrong type of process_version")
    return int_field(obj, "process_version", required=False, default=1, limit=INT32)


def tenant_field(obj: dict, field: str = "tenant_id", named: str | None = None) -> str:
    """A tenant: missing, null or "" is DEFAULT_TENANT (`named`: the field as a reason names it)."""
    value = value_of(obj, field, False)
    if value is None or value == "":
        return DEFAULT_TENANT
    if not isinstance(value, str):
        raise BadRecord(f"wrong type of {named or field}")
    return value


# Built once: `json.loads`/`json.dumps` with options build a new decoder/encoder per call. Integers are
# read by the C scanner itself; a line it refuses otherwise than as invalid JSON (an integer past Python's
# limit of digits) is read again by `_EXACT`, whose `parse_int` hook (a Python call per integer) reads it.
_FLOATS = _Floats()
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_FLOATS)
_EXACT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_FLOATS, parse_int=_parse_int)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def compact_json(value) -> str:
    """A value as compact JSON text (how variables are kept)."""
    return _COMPACT.encode(value)


def canonical_bytes(obj: dict) -> bytes:
    """The JSON of a line just decoded (`decode`, `check_text`), as equal-as-parsed-JSON compares lines
    (1.0 is 1): what its content hash is of."""
    return canonical_json(_integral_floats_as_ints(obj) if _FLOATS.integral else obj).encode("utf-8")


def check_text(raw: bytes, obj: dict) -> None:
    """BadRecord if a string of `obj`, decoded from `raw`, holds a lone surrogate escape such as
    "\\ud800" (not Unicode text): looked for only when `raw` has an escape that may be one."""
    if b"\\ud" in raw or b"\\uD" in raw:
        try:
            compact_json(obj).encode("utf-8")
        except UnicodeEncodeError:
            raise BadRecord("invalid JSON: unpaired surrogate escape in a string") from None


def canonical_json(value) -> str:
    return _CANONICAL.encode(value)


def decode(raw: bytes) -> dict:
    """Bytes of one line -> JSON object, or BadRecord."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecord(f"non-UTF-8 bytes at offset {exc.start}") from None
    try:
        if text.startswith("\ufeff"):  # as json.loads does
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        obj = _decoded(text)
    except BadRecord:
        raise
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise BadRecord(f"invalid JSON: {str(exc)[:120]}") from None
    if not isinstance(obj, dict):
        raise BadRecord("invalid JSON: not an object")
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:  # else it cannot nest that deep
        _check_depth(obj)
    return obj


def _decoded(text: str):
    _FLOATS.integral = False
    try:
        return _DECODER.decode(text)
    except (json.JSONDecodeError, BadRecord):
        raise
    except ValueError:  # an integer of more digits than Python converts by default (or a constant)
        _FLOATS.integral = False
        return _EXACT.decode(text)


def _too_deep() -> BadRecord:
    return BadRecord(f"nested too deeply: arrays and objects more than {MAX_DEPTH} levels deep")


def _check_depth(obj: dict) -> None:
    """BadRecord if arrays and objects nest more than MAX_DEPTH levels deep (a walk without recursion)."""
    level, depth = [obj], 1
    while level := [v for c in level for v in (c.values() if isinstance(c, dict) else c)
                    if isinstance(v, (dict, list))]:
        depth += 1
        if depth > MAX_DEPTH:
            raise _too_deep()
