"""Opening a landing file: only a regular file whose real path lies in the landing, checked
on what was opened, so that a link swapped after its path was checked is not read."""

from __future__ import annotations

import os

import pytest

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
