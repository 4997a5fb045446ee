"""The checks before a command's work starts, the same for the CLI and the Airflow tasks
(the settings from the environment: `config.validate`). Without Spark: a bad landing or
lake is one line at once, not an error after Spark's start."""

from __future__ import annotations

from pathlib import Path

from correlake.errors import UsageError
from correlake.lake.landing import check_locations, unread_warning


def check_run(landing: str | None, lake: str) -> str | None:
    """Before a run over `landing`, or a rebuild (None): UsageError unless the landing and
    the lake can be used (the lake folder is created if need be), or the lake holds bronze
    to rebuild from. Returns the warning naming what the landing holds that a run will not read."""
    if landing is None:
        require_bronze(lake)
        return None
    check_locations(landing, lake)
    return unread_warning(landing)


def require_folder(lake: str | Path) -> None:
    """UsageError unless the lake folder exists (a command that reads a lake, not a run)."""
    if not Path(lake).is_dir():
        raise UsageError(f"lake folder {lake} does not exist")


def require_bronze(lake: str) -> None:
    """A rebuild's source: UsageError if the lake holds no bronze."""
    if not (Path(lake) / "bronze").is_dir():
        raise UsageError(f"{lake} holds no bronze tables to rebuild from")
