"""Bronze: landing lines parsed, checked, and split into records and quarantine.

Pure DataFrame functions; reading and writing tables is in `lake.py`.
"""

from __future__ import annotations

import gzip
import re
import zlib

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from .landing import LandingFile
from .parsing import BadRecord, parse_line
from .schemas import PARSED, STREAM_FIELDS, STREAM_TIME
from .sequential import to_batches

_PARSED_ARROW = to_arrow_schema(PARSED)
# Landing files are read as they are, without Hadoop's checksum files, whose paths it
# cannot build for names with a colon (`2026-01-01T00:00:00Z.jsonl`).
_READ_OPTIONS = {"fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem", "fs.file.impl.disable.cache": "true"}
_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")


def _literal(path: str) -> str:
    """The path with Hadoop's glob characters escaped: `a[1].jsonl` is that file, not `a1.jsonl`."""
    return _GLOB_CHARS.sub(r"\\\1", path)


def split_lines(path: str, content: bytes) -> list[bytes]:
    """The lines of a file (gzip by suffix); CR-LF tolerated."""
    if path.endswith(".gz") and content:
        content = gzip.decompress(content)
    lines = content.split(b"\n")
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def parse_file(stream: str, path: str, content: bytes):
    """One parsed row per non-blank line of a landing file."""
    try:
        lines = split_lines(path, content)
    except (OSError, EOFError, zlib.error) as exc:
        yield {"stream": stream, "_source_file": path, "_line": 0, "raw": None,
               "reason": f"unreadable gzip file: {exc}"}
        return
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
    entry = lambda h, f, l: F.struct(F.col(h).alias("h"), F.col(f).alias("f"), F.col(l).alias("l"))  # noqa: E731
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
