"""The driver JVM's class archive (HotSpot's application class-data sharing): the
classes of Spark, Delta and Scala that a run loads, parsed and verified once by the
set-up (`python -m correlake.driver.archive`), then mapped by each driver JVM at start.
A fresh process (a `correlake` command, an Airflow task without a driver) starts its
JVM some 2.5 s sooner and with a fifth less CPU (docs/performance.md).

A JVM aborts on an archive cut short, so the set-up keeps one only once a JVM has mapped
it whole, under its final name by an atomic rename.

An archive serves only the Java and the JARs it was made with: its name is a digest
of them, so after any change (a new JDK, other JARs, the S3 JARs fetched) no archive
matches, the JVM starts without one, and the next set-up makes a new one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from correlake.config import SparkSettings
from correlake.runtime.jars import delta_jars, s3_jars

# HotSpot's notes on classes it leaves out, or on archives it cannot map
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def _java() -> Path | None:
    """The `java` Spark starts (JAVA_HOME's, else the PATH's), its links resolved."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _spark_jars() -> list[Path]:
    import pyspark

    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    return sorted(home.joinpath("jars").glob("*.jar"))


def path(settings: SparkSettings) -> Path | None:
    """Where the archive for this Java and these JARs is (or would be); None without a `java`."""
    java = _java()
    if java is None:
        return None
    digest = hashlib.sha256()
    for item in [java, *java.parents[1].glob("lib/server/libjvm.so"), *_spark_jars(),
                 *map(Path, delta_jars(settings)), *map(Path, s3_jars(settings))]:
        stat = item.stat()
        digest.update(f"{item}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return settings.jars_dir / "class-archive" / f"{digest.hexdigest()[:20]}.jsa"  # set-up's, as the JARs are


def java_options(settings: SparkSettings, dump_to: Path | None = None) -> list[str]:
    """The driver's options that map the archive, if the set-up made one for this Java and
    these JARs; or, `dump_to`, that write one there as the JVM exits."""
    if dump_to is not None:
        return [f"-XX:ArchiveClassesAtExit={dump_to}", *QUIET]
    archive = path(settings)
    return [f"-XX:SharedArchiveFile={archive}", *QUIET] if archive is not None and archive.exists() else []


def mappable(archive: Path) -> bool:
    """Whether a JVM maps `archive` rather than aborting (its crash report kept out of the way)."""
    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run([str(_java()), f"-XX:SharedArchiveFile={archive}", *QUIET,
                               f"-XX:ErrorFile={scratch}/hs_err.log", "-version"],
                              cwd=scratch, capture_output=True).returncode == 0
