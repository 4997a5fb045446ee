"""Files of a lake's state (`<lake>/_state/`): small files written whole or not at all, and
the compare-and-swap writes the run lock is made of. The same operations on a local (or
POSIX) folder, where an `flock` serialises each check and write, and in object storage,
where the store checks them itself (conditional writes: `If-None-Match`, `If-Match`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from correlake.config import ABANDONED_TMP_SECONDS, is_uri, lake_state_dir
from correlake.lake import objectstore


def write_atomic(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a full disk, a kill mid-write leave the old file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class Held(RuntimeError):
    """Another process holds the `flock` that was asked for without waiting."""


@contextmanager
def flocked(path: Path, wait: bool = True):
    """Hold an exclusive `flock` on `path` (created if need be) while the block runs: one
    process at a time. Released when the block ends, or its process dies. Without `wait`,
    raises Held at once when another process holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise Held(f"{path} is held by another process") from None
        yield
    finally:
        os.close(fd)


def state_dir(lake: str | Path) -> Path:
    """A local lake's `_state` folder, created if need be."""
    path = lake_state_dir(lake)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Seen:
    """A state file as read: its text, the tag a conditional write compares, its age in seconds."""
    text: str
    tag: str
    age: float


class LocalState:
    """`_state` in a local folder. A tag is the file's text; each conditional write holds the
    file's `<name>.guard` flock from its check to its write."""

    def __init__(self, lake: str):
        self.lake = lake

    def where(self, name: str) -> str:
        return str(lake_state_dir(self.lake) / name)

    def read(self, name: str) -> str | None:
        try:
            return (lake_state_dir(self.lake) / name).read_text()
        except FileNotFoundError:
            return None

    def seen(self, name: str) -> Seen | None:
        path = lake_state_dir(self.lake) / name
        try:
            text = path.read_text()
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return None
        return Seen(text, text, age)

    def write(self, name: str, text: str) -> None:
        path = state_dir(self.lake) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)

    def delete(self, name: str) -> None:
        (lake_state_dir(self.lake) / name).unlink(missing_ok=True)

    def _guarded(self, name: str):
        return flocked(state_dir(self.lake) / f"{name}.guard")

    def create(self, name: str, text: str) -> str | None:
        """Write `name` if there is none: its tag, or None."""
        with self._guarded(name):
            if (lake_state_dir(self.lake) / name).exists():
                return None
            for tmp in lake_state_dir(self.lake).glob(".*.tmp"):  # left by a process killed as it wrote
                with contextlib.suppress(FileNotFoundError):
                    if time.time() - tmp.stat().st_mtime > ABANDONED_TMP_SECONDS:  # not one being written
                        tmp.unlink()
            self.write(name, text)
        return text

    def replace(self, name: str, text: str, tag: str) -> str | None:
        """Write `name` if it is still as tagged: its new tag, or None."""
        with self._guarded(name):
            if self.read(name) != tag:
                return None
            self.write(name, text)
        return text

    def remove(self, name: str, tag: str) -> bool:
        """Delete `name` if it is still as tagged."""
        with self._guarded(name):
            if self.read(name) != tag:
                return False
            self.delete(name)
        return True


class ObjectState:
    """`_state` in object storage. A tag is the object's ETag; the store itself refuses a
    conditional write whose condition does not hold (HTTP 412)."""

    def __init__(self, lake: str):
        self.bucket, prefix = objectstore.split(lake)
        self.prefix = f"{prefix}/_state/" if prefix else "_state/"

    def where(self, name: str) -> str:
        return f"s3a://{self.bucket}/{self.prefix}{name}"

    def _get(self, name: str) -> dict | None:
        return objectstore.unless(objectstore.MISSING, objectstore.client().get_object,
                                  Bucket=self.bucket, Key=self.prefix + name)

    def read(self, name: str) -> str | None:
        got = self._get(name)
        return None if got is None else got["Body"].read().decode()

    def seen(self, name: str) -> Seen | None:
        got = self._get(name)
        if got is None:
            return None
        return Seen(got["Body"].read().decode(), got["ETag"], objectstore.age(got))

    def write(self, name: str, text: str) -> None:
        objectstore.client().put_object(Bucket=self.bucket, Key=self.prefix + name, Body=text.encode())

    def delete(self, name: str) -> None:
        objectstore.client().delete_object(Bucket=self.bucket, Key=self.prefix + name)

    def _put(self, name: str, text: str, **condition) -> str | None:
        put = objectstore.unless(objectstore.REFUSED, objectstore.client().put_object,
                                 Bucket=self.bucket, Key=self.prefix + name, Body=text.encode(), **condition)
        return None if put is None else put["ETag"]

    def create(self, name: str, text: str) -> str | None:
        return self._put(name, text, IfNoneMatch="*")

    def replace(self, name: str, text: str, tag: str) -> str | None:
        return self._put(name, text, IfMatch=tag)

    def remove(self, name: str, tag: str) -> bool:
        return objectstore.unless(objectstore.REFUSED, objectstore.client().delete_object,
                                  Bucket=self.bucket, Key=self.prefix + name, IfMatch=tag) is not None


def state(lake: str) -> LocalState | ObjectState:
    """The lake's `_state`, where it is."""
    return ObjectState(lake) if is_uri(lake) else LocalState(lake)


def remove_tree(location: str) -> None:
    """Delete a folder, or every object under a prefix, and all it holds."""
    if is_uri(location):
        objectstore.delete_prefix(location)
    else:
        shutil.rmtree(location, ignore_errors=True)


def names(folder: str) -> list[str]:
    """The names of the files directly in a folder (or under a prefix): [] if none."""
    if is_uri(folder):
        return [entry.name for entry in objectstore.listing(folder, recursive=False)]
    try:
        return [entry.name for entry in os.scandir(folder) if entry.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def written_at(path: str) -> float | None:
    """When a file (or object) was last written, in seconds since the epoch; None if none is."""
    if is_uri(path):
        bucket, key = objectstore.split(path)
        head = objectstore.unless(objectstore.MISSING, objectstore.client().head_object, Bucket=bucket, Key=key)
        return None if head is None else head["LastModified"].timestamp()
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return None


def holds_older(folder: str, cutoff: float, beside: str) -> bool:
    """Whether a file (or object) under `folder`, outside its subfolder `beside`, was last
    written before `cutoff` (seconds since the epoch); an empty subfolder counts as one."""
    if is_uri(folder):
        return any(entry.modified_at.timestamp() < cutoff for entry in objectstore.listing(folder)
                   if entry.name.split("/", 1)[0] != beside)
    for where, dirs, names in os.walk(folder):
        if where == folder:
            dirs[:] = [name for name in dirs if name != beside]
        elif not dirs and not names:
            return True
        for name in names:
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                if os.stat(os.path.join(where, name), follow_symlinks=False).st_mtime < cutoff:
                    return True
    return False


def folder_ages(folder: str) -> dict[str, float]:
    """The folders in `folder` (prefixes under a prefix), each with the seconds since it, or
    in object storage the newest object in it, was last written."""
    if is_uri(folder):
        newest: dict = {}
        for entry in objectstore.listing(folder):
            name = entry.name.split("/", 1)[0]
            newest[name] = max(newest.get(name, entry.modified_at), entry.modified_at)
        return {name: time.time() - at.timestamp() for name, at in newest.items()}
    ages = {}
    try:
        for entry in os.scandir(folder):
            try:
                if entry.is_dir():
                    ages[entry.name] = time.time() - entry.stat().st_mtime
            except FileNotFoundError:  # removed meanwhile by another run
                continue
    except FileNotFoundError:
        pass
    return ages
