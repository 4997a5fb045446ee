"""The landing zone: which files exist, and which of them are new."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from correlake.config import MAX_FILE_BYTES, STREAMS, table_path
from correlake.errors import UsageError
from correlake.text import escape

SUFFIXES = (".jsonl", ".jsonl.gz")
HIDDEN = (".", "_")  # names Spark's file sources skip (and producers' usual temporary names)
HIDDEN_WHY = "hidden name: starts with . or _"
NOT_UTF8_WHY = "name not UTF-8: rename it"  # Spark takes paths as text


@dataclass(frozen=True)
class LandingFile:
    stream: str
    path: str
    size: int
    modified_at: int  # epoch millis

    @property
    def identity(self) -> tuple:
        return (self.path, self.size, self.modified_at)


def check_locations(landing: str, lake: str) -> None:
    """UsageError unless `landing` is a folder and not a lake, and `lake` is neither it nor
    inside its streams and is a folder that can be written (created if need be)."""
    if not Path(landing).is_dir():
        raise UsageError(f"landing folder {landing} does not exist or is not a folder")
    if (not any((Path(landing) / stream).is_dir() for stream in STREAMS)
            and (Path(table_path(landing, "runs")) / "_delta_log").is_dir()):
        raise UsageError(f"{landing} is a correlake lake, not a landing folder (no {'/ or '.join(STREAMS)}/ in it): "
                         "are --landing and --lake the wrong way round?")
    lake_dir, landing_dir = Path(lake).resolve(), Path(landing).resolve()
    if lake_dir == landing_dir or any(landing_dir / stream in (lake_dir, *lake_dir.parents) for stream in STREAMS):
        raise UsageError(f"the lake {lake} cannot be the landing folder {landing} or in its streams")
    if lake_dir.exists() and not lake_dir.is_dir():
        raise UsageError(f"cannot use {lake} as the lake folder: not a folder")
    try:
        lake_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot use {lake} as the lake folder: {exc.strerror}") from None
    if not os.access(lake_dir, os.W_OK | os.X_OK):
        raise UsageError(f"cannot use {lake} as the lake folder: not writable")


def _scan(landing: str | Path, stream: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The landing files under `<landing>/<stream>/`, at any depth (links to folders
    followed, each folder read once, hidden ones not), and what a run will not read
    there: (relative path, why: empty for a name that is not a landing file's)."""
    root = Path(landing) / stream
    files, notes = [], []

    def note(path: str, why: str = "", folder: bool = False) -> None:
        shown = escape(os.fsencode(os.path.relpath(path, landing)).decode("utf-8", "backslashreplace"))
        notes.append((shown + ("/" if folder else ""), why))

    def unreadable_folder(exc: OSError) -> None:
        if exc.filename != str(root) or root.is_dir():  # a missing stream folder is noted by `unread`
            note(exc.filename, exc.strerror or str(exc), folder=True)

    seen = set()
    for folder, subfolders, names in os.walk(root, onerror=unreadable_folder, followlinks=True):
        if (real := os.path.realpath(folder)) in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        kept = []
        for name in sorted(subfolders):
            if why := _unlisted(name):  # e.g. a producer's staging folder
                note(os.path.join(folder, name), why, folder=True)
            else:
                kept.append(name)
        subfolders[:] = kept
        for name in names:
            path = os.path.join(folder, name)
            if not name.endswith(SUFFIXES):
                note(path)
            elif why := _unlisted(name) or _unreadable(path):
                note(path, why)
            else:
                files.append(path)
    return files, notes


def _unlisted(name: str) -> str | None:
    """Why a file or folder of this name is not read, whatever it holds, or None."""
    if name.startswith(HIDDEN):
        return HIDDEN_WHY
    try:
        name.encode("utf-8")  # os.walk keeps other bytes as lone surrogates
    except UnicodeEncodeError:
        return NOT_UTF8_WHY
    return None


def _unreadable(path: str) -> str | None:
    """Why a run cannot read this file (it is then read once it can), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return "broken link" if os.path.islink(path) and not os.path.exists(path) else exc.strerror or str(exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_FILE_BYTES:
            return f"{st.st_size:,} bytes: split it, Spark reads a landing file whole, {MAX_FILE_BYTES:,} bytes at most"
        return None
    finally:
        os.close(fd)


def list_files(landing: str | Path) -> list[LandingFile]:
    """Every readable `<landing>/<stream>/**/*.jsonl[.gz]`, sorted by path."""
    found = []
    for stream in STREAMS:
        for found_path in _scan(landing, stream)[0]:
            path = os.path.abspath(found_path)
            st = os.stat(path)
            found.append(LandingFile(stream, path, st.st_size, st.st_mtime_ns // 1_000_000))
    return sorted(found, key=lambda f: f.path)


def unread(landing: str | Path) -> list[str]:
    """What a run will not read, for a warning (relative paths): first what needs a look
    (missing stream folders; hidden or unreadable files, with why), then files in the
    stream folders not named `*.jsonl[.gz]` and anything else at the landing's top."""
    others = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in Path(landing).iterdir()
                    if entry.name not in STREAMS)
    problems = []
    for stream in STREAMS:
        if not (Path(landing) / stream).is_dir():
            problems.append(f"{stream}/ (no such folder)")
        for path, why in sorted(_scan(landing, stream)[1]):
            if why:
                problems.append(f"{path} ({why})")
            else:
                others.append(path)
    return problems + others


def unread_warning(landing: str | Path, shown: int = 5) -> str | None:
    """One line naming what `unread` finds, or None."""
    notes = unread(landing)
    if not notes:
        return None
    more = f" and {len(notes) - shown} more" if len(notes) > shown else ""
    return (f"correlake: warning: not read from the landing zone (only readable <stream>/**/*.jsonl[.gz] "
            f"are): {', '.join(notes[:shown])}{more}")


def new_files(landing: str | Path, ingested: set[tuple]) -> list[LandingFile]:
    """Files whose (path, size, mtime) was not ingested before."""
    return [f for f in list_files(landing) if f.identity not in ingested]
