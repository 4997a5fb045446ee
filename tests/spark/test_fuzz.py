"""Bad input at scale: two real runs over a seeded, fuzzed landing in which most kinds of
malformed line and file are mixed with good ones. Every line must be accounted for (in
bronze or quarantine, with the expected reason), per file as `_meta/ingested_files`
says, and the runs must go on to write gold."""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections import Counter
from pathlib import Path

import pytest
from support.lake_rows import table_rows

from correlake.run import pipeline

T0 = 1_767_225_600_000
MB = 1 << 20
NESTED = 5000


def dump(obj) -> bytes:
    return json.dumps(obj).encode()


def with_variable(record: dict, value: bytes) -> bytes:
    """The record's line with `value` (raw JSON text) as variables.x."""
    return dump({**record, "variables": {"x": "@@"}}).replace(b'"@@"', value)


# A malformed variant of a good message: (bytes of the line, expected quarantine reason).
BAD_MESSAGES = [
    lambda r, rng: (dump(r)[:rng.randrange(1, len(dump(r)) - 1)], "invalid JSON"),  # truncated
    lambda r, rng: (dump({**r, "position": str(r["position"])}), "wrong type of position"),
    lambda r, rng: (dump({**r, "name": 5}), "wrong type of name"),
    lambda r, rng: (dump({**r, "published_at": True}), "wrong type of published_at"),
    lambda r, rng: (dump({**r, "ttl_ms": "60"}), "wrong type of ttl_ms"),
    lambda r, rng: (dump({**r, "variables": [1]}), "wrong type of variables"),
    lambda r, rng: (dump({**r, "correlation_key": {"a": 1}}), "wrong type of correlation_key"),
    lambda r, rng: (dump({k: v for k, v in r.items() if k != "name"}), "missing field name"),
    lambda r, rng: (dump({**r, "ttl_ms": -1}), "negative ttl_ms"),
    lambda r, rng: (dump({**r, "published_at": "2026-01-01T00:00:00"}), "timestamp without offset"),
    lambda r, rng: (dump({**r, "published_at": "9999-12-31T23:59:59-01:00"}), "published_at out of range"),
    lambda r, rng: (dump({**r, "name": "@@"}).replace(b"@@", b"\xc3\x28"), "non-UTF-8 bytes at offset"),
    lambda r, rng: (dump({**r, "name": "\ud800"}), "invalid JSON: unpaired surrogate escape"),
    lambda r, rng: (with_variable(r, b"1e400"), "number out of range"),
    lambda r, rng: (with_variable(r, b"NaN"), "invalid JSON"),
    lambda r, rng: (with_variable(r, b"[" * NESTED + b"]" * NESTED), "nested too deeply"),
    lambda r, rng: (with_variable(r, b"[" * 600 + b"1.0" + b"]" * 600), "nested too deeply"),  # stopped the run
    lambda r, rng: (rng.choice([b"[1, 2]", b'"text"', b"42", b"null"]), "invalid JSON: not an object"),
    lambda r, rng: (b"\xef\xbb\xbf" + dump(r), "invalid JSON: Unexpected UTF-8 BOM"),
    lambda r, rng: (dump(r) + b"\r" + dump(r), "invalid JSON"),  # a bare CR is not a line break
    lambda r, rng: (dump({**r, "variables": {"blob": "x" * MB}})[:-2], "invalid JSON"),  # huge and truncated
]
BAD_EVENTS = [
    lambda r, rng: (dump({**r, "type": "TELEPORTED"}), "unknown type"),
    lambda r, rng: (dump({**r, "element_type": "TASK"}), "unknown element_type"),
    lambda r, rng: (dump({k: v for k, v in r.items() if k != "element_instance_key"}),
                    "missing field element_instance_key"),
    lambda r, rng: (dump({**r, "process_instance_key": True}), "wrong type of process_instance_key"),
    lambda r, rng: (dump({**r, "timestamp": "2026-01-01T00:00:00+25:00"}), "unparseable timestamp in timestamp"),
]
# Good messages that are hard on the pipeline all the same.
ODD_MESSAGES = [
    lambda r: {**r, "variables": {"blob": "x" * MB}},  # a 1 MB line
    lambda r: {**r, "name": "n" * (MB // 4)},
    lambda r: {**r, "variables": {"deep": json.loads("[" * 200 + "]" * 200)}},
    lambda r: {**r, "correlation_key": "k\u00e9\u4e2d\U0001f600", "variables": {"\u0000": "\u2028"}},
]


class FuzzLanding:
    """Writes fuzzed landing files and knows what must become of each of their lines."""

    def __init__(self, root: Path, seed: int):
        self.root, self.rng = root, random.Random(seed)
        self.next_position = {"messages": 0, "workflow_events": 0}
        self.known: dict[tuple, dict] = {}        # (stream, position) -> the record standing in bronze
        self.history: list[tuple[str, dict]] = []  # every well-formed record written, for replays/conflicts
        self.lines: dict[str, int] = {}            # path -> lines read (an unreadable gzip: one)
        self.bad: dict[tuple, str] = {}            # (path, line) -> expected reason prefix
        self.records: list[tuple] = []             # (path, line, stream, record) of this run's good records
        self.outcome: dict[tuple, str] = {}        # (path, line) -> new | replay | conflict

    def good(self, stream: str) -> dict:
        rng = self.rng
        self.next_position[stream] += 1
        position = self.next_position[stream]
        key = f"k{rng.randrange(40)}"
        if stream == "messages":
            return {"position": position, "name": rng.choice(["pay", "ship"]), "correlation_key": key,
                    "published_at": T0 + rng.randrange(3_600_000), "ttl_ms": rng.choice([0, 3_600_000]),
                    "variables": {"n": rng.randrange(100)}}
        return {"position": position, "type": "SUBSCRIPTION_OPENED", "timestamp": T0 + rng.randrange(3_600_000),
                "bpmn_process_id": "p", "process_instance_key": f"p{position}", "element_instance_key": f"e{position}",
                "element_type": "RECEIVE_TASK", "message_name": rng.choice(["pay", "ship"]), "correlation_key": key}

    def line(self, stream: str) -> tuple[bytes, object]:
        """One line: (bytes, a record dict or the expected reason)."""
        rng, roll = self.rng, self.rng.random()
        if roll < 0.45 or not self.history:
            record = self.good(stream)
            if stream == "messages" and rng.random() < 0.02:
                record = rng.choice(ODD_MESSAGES)(record)
            return dump(record), record
        if roll < 0.55:  # the same position again: a replay (keys reordered) or a conflict
            same_stream = [r for s, r in self.history if s == stream] or [self.good(stream)]
            record = dict(rng.choice(same_stream))
            if rng.random() < 0.5:
                record = dict(reversed(list(record.items())))
            else:
                record["correlation_key"] = f"other-{rng.randrange(1000)}"
            return dump(record), record
        bad = BAD_MESSAGES if stream == "messages" else BAD_EVENTS
        return rng.choice(bad)(self.good(stream), rng)

    def write(self, stream: str, name: str, count: int, kind: str = "plain") -> None:
        """A landing file of `count` lines, blank ones sprinkled in; kind: plain, crlf, gz, gz-members."""
        path = self.root / stream / name
        path.parent.mkdir(parents=True, exist_ok=True)
        raw, number = [], 0
        for _ in range(count):
            if self.rng.random() < 0.05:
                raw.append(self.rng.choice([b"", b"   ", b"\t", b"\r"]))
                number += 1
            data, what = self.line(stream)
            raw.append(data)
            number += 1
            key = (str(path), number)
            if isinstance(what, dict):
                self.records.append((str(path), number, stream, what))
                self.history.append((stream, what))
            else:
                self.bad[key] = what
        eol = b"\r\n" if kind == "crlf" else b"\n"
        content = b"".join(line + eol for line in raw)
        if kind == "gz":
            content = gzip.compress(content)
        elif kind == "gz-members":
            half = len(raw) // 2
            content = gzip.compress(b"\n".join(raw[:half]) + b"\n") + gzip.compress(b"\n".join(raw[half:]) + b"\n")
        path.write_bytes(content)
        self.lines[str(path)] = count

    def write_special(self, stream: str, tag: str) -> None:
        """Empty and zero-byte files, blank-only gzip, truncated and corrupt gzip."""
        folder = self.root / stream / tag / "special"  # after the earlier runs' paths, as a producer writes
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in ((f"{tag}-empty.jsonl", b""), (f"{tag}-zero.jsonl.gz", b""),
                              (f"{tag}-blank.jsonl.gz", gzip.compress(b"\n \n\r\n"))):
            (folder / name).write_bytes(content)
            self.lines[str(folder / name)] = 0
        (folder / f"{tag}-corrupt.jsonl.gz").write_bytes(bytes(self.rng.randrange(256) for _ in range(300)))
        self.lines[str(folder / f"{tag}-corrupt.jsonl.gz")] = 1
        self.bad[(str(folder / f"{tag}-corrupt.jsonl.gz"), 0)] = "unreadable gzip file: "
        for name, cut in ((f"{tag}-truncated.jsonl.gz", True), (f"{tag}-garbage-after.jsonl.gz", False)):
            records = [self.good(stream) for _ in range(50)]
            whole = gzip.compress(b"".join(dump(r) + b"\n" for r in records))
            content = whole[:len(whole) // 2] if cut else whole + b"not gzip"
            (folder / name).write_bytes(content)
            # the lines before the break are read; the rest is one row, after them
            complete = zlib.decompressobj(wbits=31).decompress(content).count(b"\n") if cut else 50
            path = str(folder / name)
            for number, record in enumerate(records[:complete], start=1):
                self.records.append((path, number, stream, record))
                self.history.append((stream, record))
            self.lines[path] = complete + 1
            self.bad[(path, complete + 1)] = f"unreadable gzip file after line {complete}: "

    def settle(self) -> None:
        """What becomes of this run's good records: the known record stands for its position,
        else the run's first by (file, line); equal ones are replays, different ones conflicts."""
        for path, number, stream, record in sorted(self.records, key=lambda r: (r[0], r[1])):
            standing = self.known.setdefault((stream, record["position"]), record)
            if standing is record:
                self.outcome[(path, number)] = "new"
            else:
                self.outcome[(path, number)] = "replay" if standing == record else "conflict"
        self.records = []


def write_run(landing: FuzzLanding, tag: str, files: int) -> None:
    kinds = ["plain", "crlf", "gz", "gz-members"]
    for stream in ("messages", "workflow_events"):
        for i in range(files):
            landing.write(stream, f"{tag}/part-{i:02d}" + (".jsonl.gz" if kinds[i % 4].startswith("gz") else ".jsonl"),
                          landing.rng.randrange(20, 120), kinds[i % 4])
        landing.write_special(stream, tag)
    landing.write("messages", f"{tag}/odd name é #[1]{{a,b}}*?.jsonl", 30)  # a name, not a glob pattern
    landing.write("workflow_events", f"{tag}/2026-01-01T00:00:00Z.jsonl", 30)
    landing.settle()


def accounted(lake_dir: str, landing: FuzzLanding, result) -> None:
    """Every line of the run's files is in bronze or quarantine, as expected, per file and per line
    (the tables read with delta-rs)."""
    files = set(landing.lines)

    def read(name, *columns):
        return table_rows(lake_dir, name, lambda _: list(columns))

    bronze = {(r["_source_file"], r["_line"]): r["_is_replay"]
              for name in ("bronze_messages", "bronze_workflow_events")
              for r in read(name, "_source_file", "_line", "_is_replay") if r["_source_file"] in files}
    quarantine = {(r["_source_file"], r["_line"]): r["reason"]
                  for r in read("quarantine", "_source_file", "_line", "reason") if r["_source_file"] in files}
    ingested = {r["path"]: r["lines"] for r in read("ingested_files", "path", "lines") if r["path"] in files}

    assert ingested == landing.lines
    per_file = Counter(path for path, _ in bronze) + Counter(path for path, _ in quarantine)
    assert {p: per_file.get(p, 0) for p in files} == landing.lines
    assert result.records_read == sum(landing.lines.values()) == len(bronze) + len(quarantine)

    expected_bad = {k: v for k, v in landing.bad.items() if k[0] in files}
    conflicts = {k for k, v in landing.outcome.items() if k[0] in files and v == "conflict"}
    assert set(quarantine) == set(expected_bad) | conflicts
    wrong = {k: (quarantine[k], reason) for k, reason in expected_bad.items() if not quarantine[k].startswith(reason)}
    assert not wrong
    assert all(quarantine[k].startswith("conflicting position") for k in conflicts)
    assert bronze == {k: v == "replay" for k, v in landing.outcome.items() if k[0] in files and v != "conflict"}


@pytest.fixture(scope="module")
def fuzzed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    landing, lake_dir = FuzzLanding(root / "landing", seed=20261122), str(root / "lake")
    write_run(landing, "run1", files=12)
    first = pipeline.run(spark, str(landing.root), lake_dir, max_quarantine_ratio=1.0)
    accounted(lake_dir, landing, first)
    landing.lines, landing.bad, landing.outcome = {}, {}, {}
    write_run(landing, "run2", files=6)  # replays of and conflicts with run 1's records too
    second = pipeline.run(spark, str(landing.root), lake_dir, max_quarantine_ratio=1.0)
    return lake_dir, landing, first, second


def test_every_line_of_both_runs_is_accounted_for(fuzzed):
    lake_dir, landing, first, second = fuzzed  # the first run was checked in the fixture
    accounted(lake_dir, landing, second)
    assert first.quarantined_total > 300 and second.replays > 0
    assert any(reason.startswith("conflicting position") for reason in second.quarantined)


def test_the_runs_go_on_to_gold(fuzzed):
    lake_dir, landing, _, _ = fuzzed
    variables = [r["variables"] for r in table_rows(lake_dir, "messages", lambda _: ["variables"])]
    accepted = sum(1 for (stream, _), _r in landing.known.items() if stream == "messages")
    assert len(variables) == accepted
    assert any(len(v) > MB for v in variables if v is not None)  # the 1 MB variable made it to gold
    assert table_rows(lake_dir, "correlations", lambda _: ["message_key"])
