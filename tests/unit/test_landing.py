"""Opening a landing file: only a regular file whose real path lies in the landing, checked
on what was opened, so that a link swapped after its path was checked is not read."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from correlake.config import PROJECT_ROOT
from correlake.lake import landing
from correlake.lake.landing import OUTSIDE_WHY, NotRead, open_landing_file


@pytest.fixture
def folders(tmp_path):
    root, away = tmp_path / "landing", tmp_path / "away"
    (root / "messages").mkdir(parents=True)
    away.mkdir()
    (root / "messages" / "a.jsonl").write_text("in\n")
    (away / "x.jsonl").write_text("out\n")
    return os.path.realpath(root), root / "messages", away


def why(path, root) -> str | None:
    try:
        fd = open_landing_file(str(path), root)
    except NotRead as exc:
        return str(exc)
    with open(fd, "rb") as f:
        assert f.read()
    return None


def test_links_in_the_landing_are_read_and_links_out_of_it_are_not(folders):
    root, msgs, away = folders
    (msgs / "in.jsonl").symlink_to(msgs / "a.jsonl")
    (msgs / "out.jsonl").symlink_to(away / "x.jsonl")
    (msgs / "up.jsonl").symlink_to("../../away/x.jsonl")
    (msgs / "folder").symlink_to(msgs)
    assert [why(msgs / name, root) for name in ("a.jsonl", "in.jsonl", "out.jsonl", "up.jsonl", "folder")] == [
        None, None, OUTSIDE_WHY, OUTSIDE_WHY, "not a regular file"]
    assert why(msgs / "a.jsonl", root[:-1]) == OUTSIDE_WHY  # …/landing is not in …/landin


def test_what_was_opened_is_checked_not_only_the_path_before(folders, monkeypatch):
    """The link swapped between the check of where it leads and its opening (as if)."""
    root, msgs, away = folders
    (msgs / "x.jsonl").symlink_to(away / "x.jsonl")
    monkeypatch.setattr(landing.os.path, "realpath", lambda path: str(msgs / "a.jsonl"))  # what it led to before
    assert why(msgs / "x.jsonl", root) == OUTSIDE_WHY
    os.mkfifo(msgs / "pipe.jsonl")  # a FIFO swapped in: opened without blocking, not read
    assert why(msgs / "pipe.jsonl", root) == "not a regular file"


READ_UNDER_A_CAP = """
import json, os, resource, sys
from correlake.lake.landing import LandingFile
from correlake.transforms.bronze import file_batches

def read(path):
    found = LandingFile("messages", path, os.path.getsize(path), 0, os.path.dirname(path))
    return [row for batch in file_batches([found]) for row in batch.select(["position", "_line", "reason"]).to_pylist()]

read(sys.argv[2])  # everything imported and warmed up before the cap
data = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmData:"))) * 1024
resource.setrlimit(resource.RLIMIT_DATA, (data + int(sys.argv[3]), resource.RLIM_INFINITY))
print(json.dumps(read(sys.argv[1])))
"""


def test_a_gzip_of_many_short_lines_inflating_past_the_memory_of_its_reader_is_streamed(tmp_path):
    """A 1 MB `.jsonl.gz` of 4,096 records, each followed by 63 blank lines of 1 KiB (gzip
    members one after another): 252 MiB of text, read as a run's Python worker reads it
    (`bronze.file_batches`) in a process that may allocate 32 MiB more than it holds once
    warmed up. Every record comes out with its line number, nothing else, no reason."""
    records, blanks, width, cap = 4096, 63, 1024, 32 << 20
    blank = gzip.compress((b" " * (width - 1) + b"\n") * blanks, compresslevel=9, mtime=0)
    path = tmp_path / "many.jsonl.gz"
    with open(path, "wb") as f:
        for n in range(records):
            f.write(gzip.compress(b'{"position": %d, "name": "m", "correlation_key": "k", "published_at": %d}\n'
                                  % (n, 1767225600000 + n), mtime=0) + blank)
    warm = tmp_path / "warm.jsonl"
    warm.write_text('{"position": 1, "name": "m", "correlation_key": "k", "published_at": 1}\n')
    assert path.stat().st_size < 2 << 20 and records * blanks * width > 7 * cap
    child = subprocess.run([sys.executable, "-c", READ_UNDER_A_CAP, str(path), str(warm), str(cap)],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "spark")})
    assert child.returncode == 0, child.stderr[-2000:]
    rows = json.loads(child.stdout)
    assert rows == [{"position": n, "_line": n * (blanks + 1) + 1, "reason": None} for n in range(records)]
