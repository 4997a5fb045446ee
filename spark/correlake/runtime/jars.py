"""The JARs a driver starts with, beside PySpark's: Delta's and, if fetched, those of `s3a://`."""

from __future__ import annotations

from correlake.config import SparkSettings
from correlake.errors import SetupError


def delta_jars(settings: SparkSettings) -> list[str]:
    jars = sorted(str(p) for p in settings.jars_dir.glob("*.jar"))
    if not any("delta-spark" in j for j in jars):
        raise SetupError(
            f"Delta JARs not found in {settings.jars_dir}; run scripts/setup.sh "
            "(or set CORRELAKE_JARS)"
        )
    return jars


def s3_jars(settings: SparkSettings) -> list[str]:
    """The JARs of `s3a://` (hadoop-aws, the AWS SDK bundle: scripts/setup.sh --s3), if fetched."""
    return sorted(str(p) for p in settings.s3_jars_dir.glob("*.jar"))
