"""The Spark JVM's logging: its configuration file and the level every logger runs at."""

from __future__ import annotations

from pathlib import Path

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
LOG_LEVEL = "ERROR"


def log_level(context, level: str) -> None:
    """Every logger of Spark's JVM at `level` (`SparkContext.setLogLevel` sets the root's only)."""
    log4j = context._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setAllLevels("", log4j.Level.toLevel(level))
