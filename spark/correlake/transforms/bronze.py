"""Bronze: landing lines parsed, checked, and split into records and quarantine.

Pure DataFrame functions; reading and writing tables is in `lake.py`.
"""

from __future__ import annotations

import re
import zlib

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from correlake.lake.landing import LandingFile
from correlake.contract.parsing import BadRecord, parse_line
from correlake.contract.schemas import PARSED, STREAM_FIELDS, STREAM_TIME
from correlake.transforms.sequential import to_batches

_PARSED_ARROW = to_arrow_schema(PARSED)
# Landing files are read as they are, without Hadoop's checksum files, whose paths it
# cannot build for names with a colon (`2026-01-01T00:00:00Z.jsonl`).
_READ_OPTIONS = {"fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem", "fs.file.impl.disable.cache": "true"}
_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")
_GZIP_CHUNK = 1 << 20


def _literal(path: str) -> str:
    """The path with Hadoop's glob characters escaped: `a[1].jsonl` is that file, not `a1.jsonl`."""
    return _GLOB_CHARS.sub(r"\\\1", path)


def gunzip(content: bytes) -> tuple[bytes, str | None]:
    """Decompress every gzip member of `content`: (the bytes decompressed, None), or, where
    it breaks off (truncated, corrupt, trailing garbage), the bytes up to there and why."""
    out = []
    while content := content.lstrip(b"\0"):  # zero padding after a member, as gzip allows
        member, rest = zlib.decompressobj(wbits=31), b""
        try:
            for start in range(0, len(content), _GZIP_CHUNK):  # output before a break is kept
                out.append(member.decompress(content[start:start + _GZIP_CHUNK]))
                if member.eof:
                    rest = member.unused_data + content[start + _GZIP_CHUNK:]
                    break
        except zlib.error as exc:
            return b"".join(out), str(exc)
        if not member.eof:
            return b"".join(out), "truncated (the file ends inside a compressed block)"
        content = rest
    return b"".join(out), None


def _lines(content: bytes) -> list[bytes]:
    """A file's lines; CR-LF tolerated."""
    return [line[:-1] if line.endswith(b"\r") else line for line in content.split(b"\n")]


def parse_file(stream: str, path: str, content: bytes):
    """One parsed row per non-blank line of a landing file (gzip by suffix). A gzip file that
    breaks off gives its lines up to there, then one row for the rest: the partial line, and why."""
    broken = None
    if path.endswith(".gz") and content:
        content, broken = gunzip(content)
    lines = _lines(content)
    partial = lines.pop() if broken is not None else None
    for number, raw in enumerate(lines, start=1):
        if not raw.strip(b" \t\r"):  # blank in JSON's sense: no record
            continue
        row = {"stream": stream, "_source_file": path, "_line": number,
               "raw": raw.decode("utf-8", errors="replace")}
        try:
            record, digest = parse_line(stream, raw)
        except BadRecord as exc:
            row["reason"] = str(exc)
        else:
            row.update(record)
            row["_record_hash"] = digest
        yield row
    if broken is not None:
        yield {"stream": stream, "_source_file": path, "_line": len(lines) + 1 if content else 0,
               "raw": partial.decode("utf-8", errors="replace") or None,
               "reason": f"unreadable gzip file{f' after line {len(lines)}' if lines else ''}: {broken}"}


def parse_landing(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """Read the given landing files; one row per line, with `reason` set for bad ones."""
    if not files:
        return spark.createDataFrame([], PARSED)
    stream_of = {f.path: f.stream for f in files}

    def run(batches):
        def rows():
            for batch in batches:
                for item in batch.to_pylist():
                    path = item["path"].removeprefix("file:")
                    yield from parse_file(stream_of[path], path, item["content"])
        yield from to_batches(rows(), _PARSED_ARROW)

    paths = [f"file://{_literal(f.path)}" for f in files]
    return (spark.read.format("binaryFile").options(**_READ_OPTIONS).load(paths)
            .select("path", "content")
            .mapInArrow(run, PARSED))


KNOWN = "stream string, position bigint, _record_hash string, _source_file string, _line bigint"


def classify(parsed: DataFrame, known: DataFrame) -> DataFrame:
    """Add `_is_replay` and turn conflicting positions into quarantine reasons.

    `known`: records already in bronze (`KNOWN`). The record that stands for a position
    is the known one, else the first of this run by (file path, line); an equal record is
    a replay, a different one a conflict.
    One pass over `parsed` (bad lines have no position: they stay as they are).
    """
    ok = F.col("reason").isNull()
    w = Window.partitionBy("stream", "position", ok).orderBy("_source_file", "_line")
    entry = lambda h, f, n: F.struct(F.col(h).alias("h"), F.col(f).alias("f"), F.col(n).alias("l"))  # noqa: E731
    k = known.select("stream", "position", entry("_record_hash", "_source_file", "_line").alias("_known"))
    rows = (parsed.withColumn("_first", F.first(entry("_record_hash", "_source_file", "_line")).over(w))
                  .withColumn("_rank", F.row_number().over(w))
                  .join(k, ["stream", "position"], "left"))
    standing = F.coalesce(F.col("_known"), F.col("_first"))
    is_new = F.col("_known").isNull() & (F.col("_rank") == 1)
    same = F.col("_record_hash") == standing["h"]
    conflict_reason = F.format_string(
        "conflicting position %d: differs from the record at %s:%d",
        F.col("position"), standing["f"], standing["l"])
    return (rows.withColumn("_is_replay", ok & ~is_new & same)
                .withColumn("reason", F.when(~ok, F.col("reason")).when(is_new | same, F.lit(None))
                            .otherwise(conflict_reason))
                .drop("_first", "_rank", "_known"))


def bronze_records(classified: DataFrame, stream: str) -> DataFrame:
    """Accepted lines of one stream (replays included, flagged), in bronze shape."""
    time_col = STREAM_TIME[stream]
    cols = [F.timestamp_millis(time_col).alias(time_col) if c == time_col else F.col(c)
            for c in STREAM_FIELDS[stream]]
    return (classified.where((F.col("stream") == stream) & F.col("reason").isNull())
            .select(*cols, "raw", "_record_hash", "_is_replay", "_source_file", "_line"))


def quarantine_records(classified: DataFrame) -> DataFrame:
    return (classified.where(F.col("reason").isNotNull())
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
                                      .select(F.lit(stream).alias("stream"), "position", "_record_hash",
                                              "_source_file", "_line"))
    return known


def line_counts(classified: DataFrame) -> list:
    """The run's lines counted in one pass (`RunResult.count_lines` adds them up): per stream,
    reason, replay, type and file, their number `n`, max event time `t` and first line."""
    return (classified.groupBy("stream", "reason", "_is_replay", "type", "_source_file")
            .agg(F.count("*").alias("n"), F.max(F.coalesce("published_at", "timestamp")).alias("t"),
                 F.min("_line").alias("first_line")).collect())
