"""The set-up's making of the driver JVM's class archive (`runtime/class_archive.py`):
`python -m correlake.driver.archive` runs a small pipeline in a JVM that writes the
classes it loaded as it exits."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from correlake.config import SparkSettings
from correlake.errors import SetupError
from correlake.runtime import class_archive


class ArchiveError(SetupError):
    """The JVM wrote no archive that maps whole."""


def build(settings: SparkSettings | None = None) -> Path | None:
    """Make the archive unless it exists: a JVM that runs a small pipeline (a first run and
    an increment, in a temporary folder) and writes the classes it loaded as it exits.
    Archives made for other JARs are removed. Returns the archive (None without `java`)."""
    settings = settings or SparkSettings()
    archive = class_archive.path(settings)
    if archive is None or archive.exists():  # each `./correlake` asks: the answer costs no Spark import
        return archive
    from correlake.driver.warm_up import warm_up
    from correlake.runtime.session import get_spark

    print("correlake setup: archiving the driver JVM's classes ...", file=sys.stderr)
    archive.parent.mkdir(parents=True, exist_ok=True)
    for old in archive.parent.glob("*.partial"):  # an interrupted set-up's
        old.unlink()
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    spark = get_spark(settings, dump_classes_to=partial)
    jvm = spark.sparkContext._gateway.proc
    warm_up(spark, rounds=1, records=200)
    spark.stop()
    jvm.stdin.close()  # PySpark's JVM exits when its stdin closes, and writes the archive as it does
    jvm.wait(timeout=600)
    if not partial.exists() or not class_archive.mappable(partial):
        partial.unlink(missing_ok=True)
        raise ArchiveError("the driver JVM's class archive could not be made (is the disk full?); "
                           "correlake works without it, and the next set-up tries again")
    for old in archive.parent.glob("*.jsa"):  # made for other JARs
        old.unlink()
    partial.replace(archive)
    return archive


if __name__ == "__main__":
    try:
        build()
    except ArchiveError as exc:  # correlake works without it
        print(f"correlake setup: warning: {exc}", file=sys.stderr)
