"""Discovery without Spark (`lake/discovery.py`): by default the whole landing; where declared
ordered, the listing from each stream's mark in a folder (folders wholly below it not
walked) and in object storage (`StartAfter`), the `_meta/ingested_files` range, the full
listing's interval, a mark never past a file that cannot be read, and a mark the ingested
files do not hold (a full listing instead)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from correlake.lake import discovery, files, meta, objectstore
from correlake.lake.landing import listing, unread

T = 1_790_000_000_000  # epoch millis
DAY = 24 * 3600 * 1000


@pytest.fixture(autouse=True)
def ordered_landing(monkeypatch):
    """The landings here declared lexically ordered, a full listing every 24 h (config.full_listing_seconds)."""
    monkeypatch.setenv("CORRELAKE_FULL_LISTING_HOURS", "24")


def ingest(lake: str, found: list, full: bool = True, held: dict | None = None, now: int = T) -> None:
    """What a run's publish records of `found`: its rows of `_meta/ingested_files`, then the marks."""
    meta.record_ingested(lake, [(f.stream, f.path, f.size, f.modified_at, 1, now, "r") for f in found], "r")
    discovery.record_published(lake, found, set(), full, held or {}, now=now)


def names(found, landing: str) -> list[str]:
    return [f.path.removeprefix(str(landing) + "/") for f in found]


def landing_of(root: Path, *paths: str) -> str:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("{}\n")
    return str(root)


def test_a_folder_landing_is_listed_from_the_mark_and_fully_at_the_set_interval(tmp_path):
    landing = landing_of(tmp_path / "landing", "messages/2026-12-04/09/a.jsonl", "messages/2026-12-04/10/b.jsonl",
                         "workflow_events/2026-12-04/10/w.jsonl")
    lake = str(tmp_path / "lake")
    ingest(lake, listing(landing)[0])
    assert json.loads(files.state(lake).read(discovery.RECORD))["marks"] == {
        "messages": f"{landing}/messages/2026-12-04/10/b.jsonl",
        "workflow_events": f"{landing}/workflow_events/2026-12-04/10/w.jsonl"}
    landing_of(Path(landing), "messages/2026-12-04/09/late.jsonl", "messages/2026-12-04/09/notes.txt",
               "messages/2026-12-04/11/c.jsonl")
    with open(f"{landing}/messages/2026-12-04/10/b.jsonl", "a") as grown:  # the file at the mark grows
        grown.write("{}\n")
    after = discovery.marks(lake, landing, now=T + DAY - 1)
    assert after is not None  # within the interval: from the marks
    assert unread(landing, after) == []  # the folder wholly below the mark is not walked
    assert unread(landing) == ["messages/2026-12-04/09/notes.txt"]
    assert meta.ingested(lake, after) == {(p, s, m) for p, s, m in meta.ingested(lake) if "/10/" in p}  # by range
    found = discovery.find(landing, lake, now=T + DAY - 1)
    assert not found.full and names(found.files, landing) == ["messages/2026-12-04/10/b.jsonl",
                                                             "messages/2026-12-04/11/c.jsonl"]
    assert [f.read_before for f in found.files] == [3, 0]  # grown: its first version's bytes not read again
    assert discovery.marks(lake, landing, now=T + DAY) is None  # due: the whole landing
    found = discovery.find(landing, lake, now=T + DAY)
    assert found.full and names(found.files, landing) == [
        "messages/2026-12-04/09/late.jsonl", "messages/2026-12-04/10/b.jsonl", "messages/2026-12-04/11/c.jsonl"]
    assert discovery.marks(lake, str(tmp_path / "another"), now=T + 1) is None  # another landing's marks: none
    assert discovery.find(landing, lake, full=True, now=T + 1).full  # asked for


def test_the_mark_stops_below_a_file_that_cannot_be_read(tmp_path):
    landing = landing_of(tmp_path / "landing", "messages/h1/a.jsonl", "messages/h3/c.jsonl")
    (tmp_path / "landing/messages/h2").mkdir()
    target = tmp_path / "landing/.staging/b.jsonl"  # in the landing, not yet written
    os.symlink(target, tmp_path / "landing/messages/h2/b.jsonl")  # a broken link: not read now
    lake = str(tmp_path / "lake")
    found, held = listing(landing)
    assert held == {"messages": f"{landing}/messages/h2/b.jsonl"}
    ingest(lake, found, held=held)
    landing_of(Path(landing), ".staging/b.jsonl")  # readable now
    assert names(discovery.find(landing, lake, now=T + 1).files, landing) == ["messages/h2/b.jsonl"]


def test_a_mark_the_ingested_files_do_not_hold_means_a_full_listing(tmp_path):
    landing = landing_of(tmp_path / "landing", "messages/h1/a.jsonl")
    lake = str(tmp_path / "lake")
    ingest(lake, listing(landing)[0])
    landing_of(Path(landing), "messages/h0/late.jsonl", "messages/h2/b.jsonl")
    discovery.record_published(lake, listing(landing)[0][-1:], set(), False, {})  # a mark ahead of the table
    found = discovery.find(landing, lake, now=T + 1)
    assert found.full and names(found.files, landing) == ["messages/h0/late.jsonl", "messages/h2/b.jsonl"]


def test_a_landing_in_object_storage_is_listed_after_the_mark(s3, monkeypatch):
    landing, lake = s3.fresh("landing"), s3.fresh("lake")
    bucket, prefix = objectstore.split(landing)

    def put(*keys: str, body: bytes = b"{}\n") -> None:
        for key in keys:
            objectstore.client().put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body)

    put("messages/h1/a.jsonl", "messages/h2/b.jsonl", "workflow_events/h1/w.jsonl")
    ingest(lake, listing(landing)[0])
    put("messages/h0/late.jsonl", "messages/h3/c.jsonl")
    put("messages/h2/b.jsonl", body=b"{}\n{}\n")  # the object at the mark, grown (written again, longer)
    asked, list_objects = [], objectstore.listing
    monkeypatch.setattr(objectstore, "listing", lambda uri, **kw: asked.append(kw.get("start_after"))
                        or list_objects(uri, **kw))
    found = discovery.find(landing, lake, now=T + 1)
    assert not found.full and names(found.files, landing) == ["messages/h2/b.jsonl", "messages/h3/c.jsonl"]
    assert [f.read_before for f in found.files] == [3, 0]
    assert asked == [f"{prefix}/messages/h2/b.json", f"{prefix}/workflow_events/h1/w.json",  # the store starts there
                     ""]  # zeebe/: no mark, the whole (empty) stream
    found = discovery.find(landing, lake, now=T + DAY)
    assert found.full and names(found.files, landing) == [
        "messages/h0/late.jsonl", "messages/h2/b.jsonl", "messages/h3/c.jsonl"]


def test_by_default_every_run_lists_the_whole_landing(tmp_path, monkeypatch):
    monkeypatch.delenv("CORRELAKE_FULL_LISTING_HOURS")  # no order declared: any file name, found by the next run
    landing = landing_of(tmp_path / "landing", "messages/b.jsonl")
    lake = str(tmp_path / "lake")
    ingest(lake, listing(landing)[0])
    landing_of(Path(landing), "messages/a.jsonl")  # below the mark
    assert discovery.marks(lake, landing, now=T + 1) is None
    found = discovery.find(landing, lake, now=T + 1)
    assert found.full and names(found.files, landing) == ["messages/a.jsonl"]
