"""Bronze: landing lines parsed, checked, and split into records and quarantine.

The landing's files are streamed line by line in Python workers (never held whole, a
line of at most MAX_LINE_BYTES); the rest are pure DataFrame functions. Reading and
writing tables is in `lake/`.
"""

from __future__ import annotations

import heapq
import io
import math
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from correlake.config import ENGINE_STREAM, LONG_LINE_RAW_BYTES, MAX_LINE_BYTES, PARSED_BATCH_BYTES, S3Settings
from correlake.contract.engine_records import USED_SQL
from correlake.contract.parsing import BadRecord
from correlake.contract.records import parse_line, record_hash
from correlake.contract.schemas import PARSED, STREAM_FIELDS, STREAM_TIME
from correlake.lake.landing import LandingFile, NotRead, open_file
from correlake.transforms.sequential import to_batches

_PARSED_ARROW = to_arrow_schema(PARSED)
_GZIP_CHUNK = 1 << 20  # bytes read, or inflated, at a time
LINE_TOO_LONG = "line too long"


class _Gunzip(io.RawIOBase):
    """The gzip members of `file` one after another (zero padding between them skipped, as
    gzip allows), inflated as they are read, _GZIP_CHUNK bytes at a time at most. It ends
    where the file does or where it breaks off (truncated, corrupt, garbage after the
    last member): `broken` then says why."""

    def __init__(self, file: BinaryIO):
        self._file, self._input, self._member, self._ended, self.broken = file, b"", None, False, None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        out = self._inflate(min(len(buffer), _GZIP_CHUNK)) if len(buffer) else b""
        buffer[:len(out)] = out
        return len(out)

    def _inflate(self, size: int) -> bytes:
        while not self._ended:
            if self._member is None:  # between members
                self._input = self._input.lstrip(b"\0")
                if not self._input:
                    self._input = self._file.read(_GZIP_CHUNK)
                    self._ended = not self._input
                    continue
                self._member = zlib.decompressobj(wbits=31)
            try:
                out = self._member.decompress(self._input, size)
            except zlib.error as exc:
                return self._break(str(exc))
            self._input = self._member.unconsumed_tail
            if self._member.eof:
                self._input, self._member = self._member.unused_data, None
            elif not out and not self._input:  # the member wants more of the file
                self._input = self._file.read(_GZIP_CHUNK)
                if not self._input:
                    return self._break("truncated (the file ends inside a compressed block)")
            if out:
                return out
        return b""

    def _break(self, why: str) -> bytes:
        self.broken, self._ended = why, True
        return b""


def _lines(file: BinaryIO) -> Iterator[tuple[bytes, bool, bool]]:
    """A file's lines, never more than MAX_LINE_BYTES of one held: (its bytes without the line
    feed, whether one ended it, whether it is too long: then only its first LONG_LINE_RAW_BYTES)."""
    while line := file.readline(MAX_LINE_BYTES + 1):
        if line.endswith(b"\n"):
            yield line[:-1], True, False
        elif len(line) <= MAX_LINE_BYTES:
            yield line, False, False  # the file's last, or the bytes before a break
        else:
            head, line, ended = line[:LONG_LINE_RAW_BYTES], None, False
            while not ended and (rest := file.readline(_GZIP_CHUNK)):  # the rest, a chunk at a time
                ended = rest.endswith(b"\n")
            yield head, ended, True


def _decoded(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class _Limited(io.RawIOBase):
    """The first `size` bytes of `file`: a landing file as listed, not what was appended since."""

    def __init__(self, file: BinaryIO, size: int):
        self._file, self._left = file, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        out = self._file.read(min(len(buffer), self._left)) if self._left > 0 else b""
        buffer[:len(out)] = out
        self._left -= len(out)
        return len(out)


def _limited(file: BinaryIO, size: int) -> BinaryIO:
    return io.BufferedReader(_Limited(file, size), _GZIP_CHUNK)


def _text(path: str, file: BinaryIO) -> tuple[BinaryIO, _Gunzip | None]:
    """A landing file's text (inflated if its name says gzip), and its `_Gunzip` if any."""
    gunzip = _Gunzip(file) if path.endswith(".gz") else None
    return (file, None) if gunzip is None else (io.BufferedReader(gunzip, _GZIP_CHUNK), gunzip)


def _ended_lines(file: LandingFile, settings: S3Settings | None) -> int:
    """How many lines a line feed ended within the file's first `read_before` bytes: those
    the run that read them took whole, before the file grew (or NotRead)."""
    with open_file(file, _GZIP_CHUNK, settings) as opened:
        text, ended = _text(file.path, _limited(opened, file.read_before))[0], 0
        while chunk := text.read(_GZIP_CHUNK):
            ended += chunk.count(b"\n")
        return ended


def parse_file(stream: str, path: str, file: BinaryIO, skip: int = 0) -> Iterator[dict]:
    """One parsed row per non-blank line of a landing file (gzip by suffix), read as a stream,
    after its first `skip` lines (read before it grew); a line longer than MAX_LINE_BYTES:
    `line too long`, its first LONG_LINE_RAW_BYTES as `raw`.
    A gzip file that breaks off gives its lines up to there, then one row for the rest:
    the partial line, and why."""
    text, gunzip = _text(path, file)
    number, partial = 0, None
    for raw, ended, too_long in _lines(text):
        raw = raw[:-1] if raw.endswith(b"\r") and not too_long else raw  # CR-LF tolerated
        if not ended and gunzip is not None and gunzip.broken is not None:
            partial = raw
            break
        number += 1
        if number <= skip:
            continue
        row = {"stream": stream, "_source_file": path, "_line": number}
        if too_long:
            yield {**row, "raw": _decoded(raw), "reason": LINE_TOO_LONG}
            continue
        if not raw.strip(b" \t\r"):  # blank in JSON's sense: no record
            continue
        row["raw"] = _decoded(raw)
        try:
            row.update(parse_line(stream, raw))
        except BadRecord as exc:
            row["reason"] = str(exc)
        yield row
    if gunzip is not None and gunzip.broken is not None:
        yield {"stream": stream, "_source_file": path, "_line": number + 1 if number or partial else 0,
               "raw": _decoded(partial) if partial else None,
               "reason": f"unreadable gzip file{f' after line {number}' if number else ''}: {gunzip.broken}"}


def read_file(file: LandingFile, settings: S3Settings | None = None) -> Iterator[dict]:
    """`parse_file`'s rows of a landing file, opened safely (`landing.open_file`); a file
    that may not be read: one row, no `_line` and why as `reason` (a run does not count
    it as read, nor record it as ingested: `RunResult.count_lines`, `stages._bronze`)."""
    try:
        skip = _ended_lines(file, settings) if file.read_before else 0
        opened = open_file(file, _GZIP_CHUNK, settings)
    except NotRead as exc:
        yield {"stream": file.stream, "_source_file": file.path, "_line": None, "reason": str(exc)}
        return
    with opened:
        yield from parse_file(file.stream, file.path, _limited(opened, file.size), skip)


def share_settings(spark: SparkSession) -> tuple[int, int]:
    """The session's split size (`spark.sql.files.maxPartitionBytes`, in bytes) and its cores."""
    target = spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes()
    return target, spark.sparkContext.defaultParallelism


def balanced_shares(files: list[LandingFile], target: int, cores: int) -> list[list[LandingFile]]:
    """The files in about equal shares of JSON (largest first, each to the smallest share):
    at least one share per core, and about one per `target` bytes."""
    total = sum(f.json_bytes for f in files)
    count = min(len(files), max(cores, math.ceil(total / target)))
    shares = [(0, n, []) for n in range(count)]
    for f in sorted(files, key=lambda f: -f.json_bytes):
        size, n, share = heapq.heappop(shares)
        share.append(f)
        heapq.heappush(shares, (size + f.json_bytes, n, share))
    return [share for _, _, share in shares]


def parse_landing(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """Read the given landing files, each streamed by a Python worker, the files spread
    over tasks in shares; one row per line, with `reason` set for bad ones (and one for
    each file not read: `read_file`)."""
    if not files:
        return spark.createDataFrame([], PARSED)
    shares, settings = balanced_shares(files, *share_settings(spark)), S3Settings()

    def run(batches):
        yield from file_batches([f for batch in batches for n in batch.column("id").to_pylist() for f in shares[n]],
                                settings)

    return spark.range(0, len(shares), 1, len(shares)).mapInArrow(run, PARSED)


def file_batches(files: list[LandingFile], settings: S3Settings | None = None) -> Iterator:
    """`read_file`'s rows of the files, one after the other, in Arrow batches of about
    PARSED_BATCH_BYTES of text: what a Python worker of `parse_landing` sends."""
    rows = (row for f in files for row in read_file(f, settings))
    yield from to_batches(rows, _PARSED_ARROW, weight=lambda row: len(row.get("raw") or ""),
                          max_weight=PARSED_BATCH_BYTES)


KNOWN = ("stream string, _partition int, position bigint, _record_hash string, raw string, _source_file string, "
         "_line bigint")
# a record's identity: its position in its stream, and an exporter record's partition (0 for the canonical streams)
_IDENTITY = ["stream", "_partition", "position"]


def _partition(df: DataFrame) -> Column:
    return F.coalesce(F.col("partition_id"), F.lit(0)) if "partition_id" in df.columns else F.lit(0)


def classify(parsed: DataFrame, known: DataFrame, repeated: DataFrame) -> DataFrame:
    """Add `_is_replay` and turn conflicting positions into quarantine reasons.

    `known`: records already in bronze (`KNOWN`); `repeated`: `repeated_identities` of these.
    The record that stands for an identity (position, and partition of an exporter record)
    is the known one, else the first of this run by (file path, line); an equal record is a
    replay, a different one a conflict. Only the records of a repeated identity are
    compared, by their content hash (`record_hash` of their `raw`, or bronze's
    `_record_hash` if it has one), in a window over their rows alone; the other rows, bad
    lines included (no position), stay as they are.
    """
    keyed = parsed.withColumn("_partition", _partition(parsed))
    if repeated.isEmpty():  # every record new: nothing to compare, no join
        return keyed.withColumn("_is_replay", F.lit(False)).drop("_partition")
    marked = keyed.join(repeated.withColumn("_twice", F.lit(True)), _IDENTITY, "left")
    single = marked.where(F.col("_twice").isNull()).withColumn("_is_replay", F.lit(False))
    compared = _compared(marked.where(F.col("_twice")), known.join(repeated, _IDENTITY, "left_semi"))
    return single.unionByName(compared).drop("_twice", "_partition")


def repeated_identities(parsed: DataFrame, known: DataFrame) -> DataFrame:
    """The identities of the accepted lines of `parsed` that come twice among them or are
    `known`, once each: a look at the key columns, which `classify` reads twice when any."""
    identities = parsed.where(F.col("reason").isNull()).select(
        "stream", _partition(parsed).alias("_partition"), "position")
    twice = identities.groupBy(*_IDENTITY).count().where("count > 1").select(*_IDENTITY)
    return twice.unionByName(identities.join(known.select(*_IDENTITY), _IDENTITY, "left_semi")).distinct()


def _compared(rows: DataFrame, known: DataFrame) -> DataFrame:
    """`classify` of the accepted `rows` whose identity comes twice, against its `known` records."""
    digest = F.udf(lambda stream, raw: record_hash(stream, raw.encode("utf-8")), "string")
    w = Window.partitionBy(*_IDENTITY).orderBy("_source_file", "_line")
    entry = lambda h, f, n: F.struct(h.alias("h"), F.col(f).alias("f"), F.col(n).alias("l"))  # noqa: E731
    k = known.select(*_IDENTITY, entry(F.coalesce("_record_hash", digest("stream", "raw")), "_source_file",
                                       "_line").alias("_known"))
    rows = (rows.withColumn("_record_hash", digest("stream", "raw"))
                .withColumn("_first", F.first(entry(F.col("_record_hash"), "_source_file", "_line")).over(w))
                .withColumn("_rank", F.row_number().over(w))
                .join(k, _IDENTITY, "left"))
    standing = F.coalesce(F.col("_known"), F.col("_first"))
    is_new = F.col("_known").isNull() & (F.col("_rank") == 1)
    same = F.col("_record_hash") == standing["h"]
    conflict_reason = F.when(F.col("_partition") > 0, F.format_string(
        "conflicting position %d of partition %d: differs from the record at %s:%d",
        F.col("position"), F.col("_partition"), standing["f"], standing["l"])).otherwise(F.format_string(
            "conflicting position %d: differs from the record at %s:%d", F.col("position"), standing["f"], standing["l"]))
    return (rows.withColumn("_is_replay", ~is_new & same)
                .withColumn("reason", F.when(is_new | same, F.lit(None)).otherwise(conflict_reason))
                .drop("_first", "_rank", "_known"))


def bronze_records(classified: DataFrame, stream: str) -> DataFrame:
    """Accepted lines of one stream (replays included, flagged), in bronze shape."""
    time_col = STREAM_TIME[stream]
    cols = [F.timestamp_millis(time_col).alias(time_col) if c == time_col else F.col(c)
            for c in STREAM_FIELDS[stream]]
    return (classified.where((F.col("stream") == stream) & F.col("reason").isNull())
            .select(*cols, "raw", "_record_hash", "_is_replay", "_source_file", "_line"))


def quarantine_records(classified: DataFrame) -> DataFrame:
    """Bad lines (not the rows of files not read: no `_line`)."""
    return (classified.where(F.col("reason").isNotNull() & F.col("_line").isNotNull())
            .select("stream", "_source_file", "_line", "raw", "reason"))


def known_records(parsed: DataFrame, history: dict[str, DataFrame]) -> DataFrame:
    """The records (`KNOWN`) that bronze (`history`: stream -> table) already holds at the
    positions `parsed` has; bronze is read within each stream's range of new positions
    only, so Delta skips the files outside it (positions grow with time)."""
    known = parsed.sparkSession.createDataFrame([], KNOWN)
    ranges = {r["stream"]: (r["lo"], r["hi"]) for r in parsed.groupBy("stream").agg(
        F.min("position").alias("lo"), F.max("position").alias("hi")).collect() if r["lo"] is not None}
    for stream, b in history.items():
        if stream in ranges:
            known = known.unionByName(b.where(~F.col("_is_replay") & F.col("position").between(*ranges[stream]))
                                      .select(F.lit(stream).alias("stream"), _partition(b).alias("_partition"),
                                              "position", "_record_hash", "raw", "_source_file", "_line"))
    return known


def line_counts(classified: DataFrame) -> list:
    """The run's lines counted in one pass (`RunResult.count_lines` adds them up): per stream,
    reason, replay, type, ignored exporter record and file, their number `n`, max event time
    `t` and first line (a file not read: one row, no first line)."""
    ignored = F.coalesce((F.col("stream") == ENGINE_STREAM) & ~F.expr(USED_SQL), F.lit(False))
    return (classified.groupBy("stream", "reason", "_is_replay", "type", ignored.alias("_ignored"), "_source_file")
            .agg(F.count("*").alias("n"), F.max(F.coalesce("published_at", "timestamp")).alias("t"),
                 F.min("_line").alias("first_line")).collect())
