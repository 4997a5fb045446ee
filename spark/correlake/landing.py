"""The landing zone: which files exist, and which of them are new."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .config import STREAMS

SUFFIXES = (".jsonl", ".jsonl.gz")


@dataclass(frozen=True)
class LandingFile:
    stream: str
    path: str
    size: int
    modified_at: int  # epoch millis

    @property
    def identity(self) -> tuple:
        return (self.path, self.size, self.modified_at)


def _paths(landing: str | Path, stream: str):
    """Every file under `<landing>/<stream>/`, at any depth."""
    for folder, _, names in os.walk(Path(landing) / stream):
        for name in names:
            yield os.path.join(folder, name)


def list_files(landing: str | Path) -> list[LandingFile]:
    """Every `<landing>/<stream>/**/*.jsonl[.gz]`, sorted by path."""
    found = []
    for stream in STREAMS:
        for path in _paths(landing, stream):
            if path.endswith(SUFFIXES):
                path = os.path.abspath(path)
                st = os.stat(path)
                found.append(LandingFile(stream, path, st.st_size, st.st_mtime_ns // 1_000_000))
    return sorted(found, key=lambda f: f.path)


def unread(landing: str | Path) -> list[str]:
    """What a run will not read, for a warning: stream folders that are missing, files in
    them not named `*.jsonl[.gz]`, and anything else at the landing's top (relative paths)."""
    notes = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in Path(landing).iterdir()
                   if entry.name not in STREAMS)
    for stream in STREAMS:
        if not (Path(landing) / stream).is_dir():
            notes.append(f"{stream}/ (no such folder)")
        notes += sorted(os.path.relpath(path, landing) for path in _paths(landing, stream)
                        if not path.endswith(SUFFIXES))
    return notes


def unread_warning(landing: str | Path, shown: int = 5) -> str | None:
    """One line naming what `unread` finds, or None."""
    notes = unread(landing)
    if not notes:
        return None
    more = f" and {len(notes) - shown} more" if len(notes) > shown else ""
    return (f"correlake: warning: not read from the landing zone (only <stream>/**/*.jsonl[.gz] are): "
            f"{', '.join(notes[:shown])}{more}")


def new_files(landing: str | Path, ingested: set[tuple]) -> list[LandingFile]:
    """Files whose (path, size, mtime) was not ingested before."""
    return [f for f in list_files(landing) if f.identity not in ingested]
