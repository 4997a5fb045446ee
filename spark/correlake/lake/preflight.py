"""The checks before a command's work starts, the same for the CLI and the Airflow tasks
(the settings from the environment: `config.validate`). Without Spark: a bad landing or
lake is one line at once, not an error after Spark's start."""

from __future__ import annotations

import os
import re
from pathlib import Path

from correlake.config import DELTA_RETAIN_HOURS, allowed_roots
from correlake.errors import UsageError
from correlake.lake.landing import check_locations, unread_warning
from correlake.text import escape


def check_run(landing: str | None, lake: str) -> str | None:
    """Before a run over `landing`, or a rebuild (None): UsageError unless the landing and
    the lake can be used (the lake folder is created if need be), or the lake holds bronze
    to rebuild from. Returns the warning naming what the landing holds that a run will not read."""
    require_posix(lake)
    if landing is None:
        require_bronze(lake)
        return None
    check_locations(landing, lake)
    return unread_warning(landing)


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def require_posix(lake: str | Path) -> None:
    """UsageError if the lake is a URI (s3a://, gs://, abfss://, file://): the lake's lock and
    journal need a POSIX file system's flock and atomic rename, which object storage has not."""
    if match := _URI.match(str(lake)):
        raise UsageError(f"the lake {lake} is a URI ({match.group()}): correlake's lake must be a local or "
                         "POSIX (e.g. NFS) folder path; object storage is not supported (no flock, no atomic rename)")


def require_folder(lake: str | Path) -> None:
    """UsageError unless the lake folder exists (a command that reads a lake, not a run)."""
    require_posix(lake)
    if not Path(lake).is_dir():
        raise UsageError(f"lake folder {lake} does not exist")


def require_bronze(lake: str) -> None:
    """A rebuild's source: UsageError if the lake holds no bronze."""
    if not (Path(lake) / "bronze").is_dir():
        raise UsageError(f"{lake} holds no bronze tables to rebuild from")


def require_allowed(path: str | Path, what: str) -> None:
    """UsageError unless `path`, links resolved, is in one of the allowed roots (a folder an
    Airflow user names in a Variable: `config.allowed_roots`)."""
    real, roots = Path(path).resolve(), allowed_roots()
    if not any(real.is_relative_to(root) for root in roots):
        raise UsageError(f"{what} {escape(str(path))} is outside the allowed root "
                         f"{os.pathsep.join(map(str, roots))} (CORRELAKE_ALLOWED_ROOT in the workers' environment)")


def check_retention(retain_hours: float | None, force: bool, hint: str) -> None:
    """UsageError for a VACUUM retention under Delta's default unless `force`: the files of
    older versions would be deleted (time travel to them fails, and so would a run staged
    before maintenance, or a reader in the middle of a query)."""
    if retain_hours is not None and retain_hours < DELTA_RETAIN_HOURS and not force:
        raise UsageError(f"a VACUUM retention of {retain_hours:g} h is under Delta's {DELTA_RETAIN_HOURS} h: it "
                         "deletes what older versions read, and a reader mid-query may lose its files "
                         f"({hint})")
