"""The landing zone: which files exist, which of them are new, and opening one safely."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from correlake.config import (
    ENGINE_STREAM,
    GZIP_RATIO,
    LANDING_STREAMS,
    STREAMS,
    S3Settings,
    absolute,
    is_uri,
    join,
    table_path,
)
from correlake.errors import UsageError
from correlake.lake import objectstore
from correlake.text import escape

SUFFIXES = (".jsonl", ".jsonl.gz")
HIDDEN = (".", "_")  # names Spark's file sources skip (and producers' usual temporary names)
HIDDEN_WHY = "hidden name: starts with . or _"
NOT_UTF8_WHY = "name not UTF-8: rename it"  # Spark takes paths as text
OUTSIDE_WHY = "a link out of the landing folder"


class NotRead(Exception):
    """Why a landing file is not read (it is read by a later run once it can be)."""


@dataclass(frozen=True)
class LandingFile:
    stream: str
    path: str
    size: int
    modified_at: int  # epoch millis
    root: str  # the landing folder's real path: the file's must lie in it when it is read
    read_before: int = 0  # the size of an earlier version ingested (it grew since): its ended lines are not read again

    @property
    def identity(self) -> tuple:
        return (self.path, self.size, self.modified_at)

    @property
    def json_bytes(self) -> int:
        """Its JSON's size, estimated (a gzip file's from its size)."""
        return self.size * (GZIP_RATIO if self.path.endswith(".gz") else 1)

    def grown(self, read: int) -> LandingFile:
        """This file, knowing that a version of `read` bytes was ingested: if it is larger, it grew
        in place (a producer appended to it) and that size is its `read_before`."""
        return replace(self, read_before=read if read < self.size else 0)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def open_landing_file(path: str, root: str) -> int:
    """A descriptor of the landing file `path`, opened to read, or NotRead. What it opened,
    links and all, is a regular file whose real path lies in the folder `root` (a real
    path): checked before opening and on the descriptor itself, so that a link swapped
    between the two is not read."""
    if not _inside(os.path.realpath(path), root):
        raise NotRead(OUTSIDE_WHY)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise NotRead("broken link" if os.path.islink(path) and not os.path.exists(path)
                      else exc.strerror or str(exc)) from None
    try:
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")  # Linux
        except OSError:
            raise NotRead("where it leads cannot be checked here (no /proc)") from None
        if not _inside(opened, root):
            raise NotRead(OUTSIDE_WHY)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRead("not a regular file")
    except NotRead:
        os.close(fd)
        raise
    return fd


def open_file(file: LandingFile, buffer_size: int, settings: S3Settings | None = None) -> BinaryIO:
    """A landing file opened to read (`open_landing_file` for a folder's; an object through
    `settings`' endpoint: the driver's, in a worker whose environment may not name it), or NotRead."""
    if not is_uri(file.path):
        return open(open_landing_file(file.path, file.root), "rb", buffering=buffer_size)
    try:
        return objectstore.open_object(file.path, buffer_size, settings)
    except FileNotFoundError:
        raise NotRead("gone since it was listed") from None
    except Exception as exc:  # refused, unreachable: read by a later run
        raise NotRead(objectstore.why(exc)) from None


def check_locations(landing: str, lake: str) -> None:
    """UsageError unless `landing` is a folder and not a lake, and `lake` is neither it nor
    inside its streams and is a folder that can be written (created if need be)."""
    if is_uri(landing) or is_uri(lake):
        return _check_uris(landing, lake)
    if not Path(landing).is_dir():
        raise UsageError(f"landing folder {landing} does not exist or is not a folder")
    if (not any((Path(landing) / stream).is_dir() for stream in LANDING_STREAMS)
            and (Path(table_path(landing, "runs")) / "_delta_log").is_dir()):
        raise UsageError(f"{landing} is a correlake lake, not a landing folder (no {'/ or '.join(LANDING_STREAMS)}/ in it): "
                         "are --landing and --lake the wrong way round?")
    lake_dir, landing_dir = Path(lake).resolve(), Path(landing).resolve()
    if lake_dir == landing_dir or any(landing_dir / stream in (lake_dir, *lake_dir.parents)
                                      for stream in LANDING_STREAMS):
        raise UsageError(f"the lake {lake} cannot be the landing folder {landing} or in its streams")
    if lake_dir.exists() and not lake_dir.is_dir():
        raise UsageError(f"cannot use {lake} as the lake folder: not a folder")
    try:
        lake_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot use {lake} as the lake folder: {exc.strerror}") from None
    if not os.access(lake_dir, os.W_OK | os.X_OK):
        raise UsageError(f"cannot use {lake} as the lake folder: not writable")


def _check_uris(landing: str, lake: str) -> None:
    """`check_locations` where the landing or the lake is in object storage (its buckets
    reachable; a lake whose bucket is is written to as it is)."""
    lake_at, landing_at = absolute(lake), absolute(landing)
    if lake_at == landing_at or any(lake_at == join(landing, s) or lake_at.startswith(join(landing, s) + "/")
                                    for s in LANDING_STREAMS):
        raise UsageError(f"the lake {lake} cannot be the landing {landing} or in its streams")
    for location, what in ((landing, "landing"), (lake, "lake")):
        if is_uri(location):
            try:
                objectstore.exists(location)
            except Exception as exc:  # a bad URI, an unknown bucket, a refused or unreachable server
                raise UsageError(f"cannot use {location} as the {what}: {objectstore.why(exc)}") from None
        elif what == "landing" and not Path(location).is_dir():
            raise UsageError(f"landing folder {landing} does not exist or is not a folder")
        elif what == "lake":
            Path(location).mkdir(parents=True, exist_ok=True)


def _below(folder: str, mark: str) -> bool:
    """Whether every path in `folder` sorts before `mark` (a path not in it)."""
    return folder + "/" < mark and not mark.startswith(folder + "/")


def _scan_objects(landing: str, stream: str, after: str = "") -> tuple[list[objectstore.Entry], list[tuple[str, str]]]:
    """`_scan` in object storage: the objects under `<landing>/<stream>/`, where nothing is a
    link and every object can be read. From `after` on (an `s3a://` path: the listing starts
    there, `StartAfter`) if given."""
    files, notes = [], []
    bucket, start = objectstore.split(after) if after else (None, "")
    for entry in objectstore.listing(join(landing, stream), start_after=start[:-1]):
        if after and f"s3a://{bucket}/{entry.key}" < after:
            continue
        relative = f"{stream}/{entry.name}"
        parts = entry.name.split("/")
        if why := next(filter(None, map(_unlisted, parts)), None):
            notes.append((escape(relative), why))
        elif not parts[-1].endswith(SUFFIXES):
            notes.append((escape(relative), ""))
        else:
            files.append(entry)
    return files, notes


def _scan(landing: str | Path, stream: str, after: str = "") -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """The landing files under `<landing>/<stream>/`, at any depth (links to folders in
    the landing followed, each folder read once, hidden ones not), what a run will not
    read there: (relative path, why: empty for a name that is not a landing file's), and
    the landing files that cannot be read now (absolute paths). Only the paths from `after`
    on (absolute) if given: folders wholly before it are not walked."""
    root, inside = Path(landing) / stream, os.path.realpath(landing)
    files, notes, held = [], [], []

    def note(path: str, why: str = "", folder: bool = False) -> None:
        shown = escape(os.fsencode(os.path.relpath(path, landing)).decode("utf-8", "backslashreplace"))
        notes.append((shown + ("/" if folder else ""), why))

    def unreadable_folder(exc: OSError) -> None:
        if exc.filename != str(root) or root.is_dir():  # a missing stream folder is noted by `unread`
            note(exc.filename, exc.strerror or str(exc), folder=True)

    if root.is_dir() and not _inside(os.path.realpath(root), inside):
        note(str(root), OUTSIDE_WHY, folder=True)
        return files, notes, held
    seen = {os.path.realpath(root)}
    for folder, subfolders, names in os.walk(root, onerror=unreadable_folder, followlinks=True):
        kept = []
        for name in sorted(subfolders):  # a folder out of the landing is not even listed
            path = os.path.join(folder, name)
            real = os.path.realpath(path)
            if after and _below(os.path.abspath(path), after):
                continue
            if why := _unlisted(name) or (None if _inside(real, inside) else OUTSIDE_WHY):  # e.g. a staging folder
                note(path, why, folder=True)
            elif real not in seen:
                seen.add(real)
                kept.append(name)
        subfolders[:] = kept
        for name in names:
            path = os.path.join(folder, name)
            if after and os.path.abspath(path) < after:
                continue
            if not name.endswith(SUFFIXES):
                note(path)
            elif why := _unlisted(name):
                note(path, why)
            elif why := _unreadable(path, inside):
                note(path, why)
                held.append(os.path.abspath(path))
            else:
                files.append(path)
    return files, notes, held


def _unlisted(name: str) -> str | None:
    """Why a file or folder of this name is not read, whatever it holds, or None."""
    if name.startswith(HIDDEN):
        return HIDDEN_WHY
    try:
        name.encode("utf-8")  # os.walk keeps other bytes as lone surrogates
    except UnicodeEncodeError:
        return NOT_UTF8_WHY
    return None


def _unreadable(path: str, root: str) -> str | None:
    """Why a run cannot read this file (it is then read once it can), or None."""
    try:
        os.close(open_landing_file(path, root))
    except NotRead as exc:
        return str(exc)
    return None


def root_of(landing: str | Path) -> str:
    """The landing's identity, its files' `root`: a folder's real path, a prefix's absolute URI."""
    return absolute(landing) if is_uri(landing) else os.path.realpath(landing)


def listing(landing: str | Path, after: dict[str, str] | None = None) -> tuple[list[LandingFile], dict[str, str]]:
    """Every readable `<landing>/<stream>/**/*.jsonl[.gz]`, sorted by path, only from each
    stream's path in `after` on if given (its own file included; "": the whole stream), and
    each stream's lowest landing file that cannot be read now."""
    after = after or {}
    found, held = [], {}
    if is_uri(landing):
        bucket, root = objectstore.split(str(landing))[0], root_of(landing)
        found = [LandingFile(stream, f"s3a://{bucket}/{entry.key}", entry.size,
                             int(entry.modified_at.timestamp() * 1000), root)
                 for stream in LANDING_STREAMS
                 for entry in _scan_objects(str(landing), stream, after.get(stream, ""))[0]]
        return sorted(found, key=lambda f: f.path), held
    root = root_of(landing)
    for stream in LANDING_STREAMS:
        files, _, unreadable = _scan(landing, stream, after.get(stream, ""))
        if unreadable:
            held[stream] = min(unreadable)
        for found_path in files:
            path = os.path.abspath(found_path)
            st = os.stat(path)
            found.append(LandingFile(stream, path, st.st_size, st.st_mtime_ns // 1_000_000, root))
    return sorted(found, key=lambda f: f.path), held


def unread(landing: str | Path, after: dict[str, str] | None = None) -> list[str]:
    """What a run will not read, for a warning (relative paths): first what needs a look
    (missing stream folders; hidden or unreadable files, with why), then files in the
    stream folders not named `*.jsonl[.gz]` and anything else at the landing's top. In the
    streams, only from the paths in `after` on if given (`listing`)."""
    after = after or {}
    if is_uri(landing):
        scans = {stream: _scan_objects(str(landing), stream, after.get(stream, "")) for stream in LANDING_STREAMS}
        present = {stream for stream, (found, notes) in scans.items() if found + notes}
        problems = [f"{stream}/ (no such folder)" for stream in _expected(present) if stream not in present]
        notes = sorted(note for _, found_notes in scans.values() for note in found_notes)
        top = sorted(entry.name for entry in objectstore.listing(str(landing), recursive=False))
        return (problems + [f"{path} ({why})" for path, why in notes if why] + top
                + [path for path, why in notes if not why])
    others = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in Path(landing).iterdir()
                    if entry.name not in LANDING_STREAMS)
    present = {stream for stream in LANDING_STREAMS if (Path(landing) / stream).is_dir()}
    problems = []
    for stream in LANDING_STREAMS:
        if stream not in present:
            problems += [f"{stream}/ (no such folder)"] if stream in _expected(present) else []
            continue
        for path, why in sorted(_scan(landing, stream, after.get(stream, ""))[1]):
            if why:
                problems.append(f"{path} ({why})")
            else:
                others.append(path)
    return problems + others


def _expected(present: set[str]) -> tuple[str, ...]:
    """The stream folders a landing is missing if it lacks them (`present`: those it has): a Zeebe
    export's if it has that one (a lake reads one kind of input), else the canonical streams'."""
    return (ENGINE_STREAM,) if ENGINE_STREAM in present else STREAMS


def unread_warning(landing: str | Path, shown: int = 5, after: dict[str, str] | None = None) -> str | None:
    """One line naming what `unread` finds, or None."""
    return warning(unread(landing, after), shown)


def warning(notes: list[str], shown: int = 5) -> str | None:
    """One line naming what a run does not read (`notes`: paths, each with why), or None."""
    if not notes:
        return None
    more = f" and {len(notes) - shown} more" if len(notes) > shown else ""
    return (f"correlake: warning: not read from the landing zone (only readable <stream>/**/*.jsonl[.gz] "
            f"are): {', '.join(notes[:shown])}{more}")

