"""The checks before a command's work starts, the same for the CLI and the Airflow tasks
(the settings from the environment: `config.validate`). Without Spark: a bad landing or
lake is one line at once, not an error after Spark's start."""

from __future__ import annotations

import os
import re
from pathlib import Path

from correlake.config import (
    BRONZE_TABLES,
    DELTA_RETAIN_HOURS,
    ENGINE_STREAM,
    STREAMS,
    absolute,
    allowed_roots,
    allowed_uris,
    is_uri,
    table_path,
)
from correlake.errors import UsageError
from correlake.lake import discovery, objectstore, tables
from correlake.lake.landing import check_locations, unread_warning
from correlake.text import escape


def check_run(landing: str | None, lake: str, full_listing: bool = False) -> str | None:
    """Before a run over `landing`, or a rebuild (None): UsageError unless the landing and
    the lake can be used (the lake folder is created if need be), or the lake holds bronze
    to rebuild from. Returns the warning naming what the landing holds that a run will not read
    (where the run lists: `discovery.marks`)."""
    require_supported(lake)
    if landing is None:
        require_bronze(lake)
        return None
    require_supported(landing)
    check_locations(landing, lake)
    return unread_warning(landing, after=discovery.marks(lake, landing, full_listing))


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def require_supported(location: str | Path) -> None:
    """UsageError unless `location` is a folder path (local or POSIX, e.g. NFS: its lock is an
    `flock`) or S3-compatible object storage, `s3a://BUCKET/PREFIX` (its lock a conditional
    write), with boto3 installed (the [s3] extra); not another URI (gs://, abfss://, file://)."""
    if is_uri(location):
        try:
            objectstore.split(str(location))
            import boto3  # noqa: F401  the [s3] extra
        except (ValueError, ImportError) as exc:
            raise UsageError(f"cannot use {location}: {exc}") from None
    elif match := _URI.match(str(location)):
        raise UsageError(f"{location} is a URI ({match.group()}): correlake's lake and landing are folder paths "
                         "(local or POSIX, e.g. NFS) or S3-compatible object storage (s3a://BUCKET/PREFIX)")


def require_folder(lake: str | Path) -> None:
    """UsageError unless the lake exists (a command that reads a lake, not a run)."""
    require_supported(lake)
    try:
        found = tables.is_table(table_path(lake, "runs")) if is_uri(lake) else Path(lake).is_dir()
    except Exception as exc:  # an unknown bucket, a refused or unreachable server
        raise UsageError(f"cannot use {lake} as the lake: {objectstore.why(exc)}") from None
    if not found:
        if not is_uri(lake) and Path(lake).exists():
            raise UsageError(f"lake {lake} is a file, not a folder: give the lake's folder")
        raise UsageError(f"lake {'' if is_uri(lake) else 'folder '}{lake} does not exist")


def require_bronze(lake: str) -> None:
    """A rebuild's source: UsageError if the lake holds no bronze."""
    if not any(tables.is_table(table_path(lake, name)) for name in BRONZE_TABLES.values()):
        raise UsageError(f"{lake} holds no bronze tables to rebuild from")


class MixedInput(UsageError):
    """Both kinds of input for one lake: the canonical streams and a Zeebe export (contract revision 4)."""


_KINDS = {False: "canonical records (messages/, workflow_events/)", True: "Zeebe exporter records (zeebe/)"}


def lake_kind(lake: str) -> str | None:
    """The kind of input the lake was built from (`_KINDS`), by its bronze tables; None: no bronze yet."""
    if tables.is_table(table_path(lake, BRONZE_TABLES[ENGINE_STREAM])):
        return _KINDS[True]
    if any(tables.is_table(table_path(lake, BRONZE_TABLES[stream])) for stream in STREAMS):
        return _KINDS[False]
    return None


def require_one_kind(lake: str, streams: set[str]) -> None:
    """MixedInput unless a run's new files (of `streams`) and the lake are of one kind of input:
    a lake reads the canonical streams or a Zeebe export, never both. Before anything is written."""
    kinds = {_KINDS[stream == ENGINE_STREAM] for stream in streams}
    if len(kinds) > 1:
        raise MixedInput(f"the landing holds both {' and '.join(sorted(kinds))}: a lake reads one kind of input; "
                         "give each kind a landing and a lake of its own")
    if kinds and (held := lake_kind(lake)) is not None and kinds != {held}:
        raise MixedInput(f"the lake {lake} was built from {held} and the landing brings {kinds.pop()}: a lake "
                         "reads one kind of input; give the other kind a lake of its own")


def require_allowed(path: str | Path, what: str) -> None:
    """UsageError unless `path`, links resolved, is in one of the allowed roots (a folder an
    Airflow user names in a Variable: `config.allowed_roots`), or a URI under an allowed one
    (`config.allowed_uris`)."""
    if is_uri(path):
        uri, uris = absolute(path), allowed_uris()
        if "/../" in f"{uri}/" or "/./" in f"{uri}/" or not any(uri.startswith(f"{root}/") for root in uris):
            raise UsageError(f"{what} {escape(uri)} is not under an allowed URI "
                             f"({', '.join(uris) or 'none'}: CORRELAKE_ALLOWED_URIS in the workers' environment)")
        return
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
