"""A lake's state and a landing in object storage, without Spark (conftest's `s3` server):
the run lock's conditional writes (one holder, one taker of a stale lock, a lost lock
noticed), the journal, and what a landing lists and does not."""

from __future__ import annotations

import json
import socket
import time

import pytest
from support.helpers import lock_takers_that_won

from correlake.lake import files, journal, lock, objectstore
from correlake.lake.landing import HIDDEN_WHY, listing, unread

DEAD = {"pid": 2 ** 22 + 12345, "host": socket.gethostname(), "started": 0}  # no such process here


def put(uri: str, body: bytes = b"") -> None:
    bucket, key = objectstore.split(uri)
    objectstore.client().put_object(Bucket=bucket, Key=key, Body=body)


def test_one_run_at_a_time_and_a_run_releases_its_own_lock_only(s3):
    lake = s3.fresh("lake")
    with lock.run_lock(lake):
        with pytest.raises(lock.LakeBusy, match=f"another correlake run holds {lake}/_state/lock"):
            with lock.run_lock(lake):
                pass
        lock.check_held(lake)
    assert files.state(lake).read("lock") is None
    successor = json.dumps({"pid": 1, "host": "another", "started": time.time()})
    with lock.run_lock(lake):  # ... taken over meanwhile, as stale: kept, and the run knows
        files.state(lake).write("lock", successor)
        with pytest.raises(lock.LockLost):
            lock.check_held(lake)
    assert files.state(lake).read("lock") == successor


def test_a_stale_lock_is_taken_over_by_one_taker_only(s3):
    """The store decides: of takers racing with the ETag they read, one write wins (412 for the others)."""
    lake = s3.fresh("lake")
    for attempt in range(3):
        files.state(lake).write("lock", json.dumps(DEAD))
        winners = lock_takers_that_won(lake, 6)
        assert len(winners) == 1, attempt
        assert json.loads(files.state(lake).read("lock"))["pid"] == winners[0]


def test_a_lock_is_as_old_as_the_store_says(s3):
    lake = s3.fresh("lake")
    files.state(lake).write("lock", "not a run's")
    seen = files.state(lake).seen("lock")
    assert 0 <= seen.age < 30 and seen.tag.strip('"')
    with pytest.raises(lock.LakeBusy):  # held, by someone it cannot name, until a minute old
        lock.check_free(lake)


def test_the_journal_in_object_storage(s3):
    lake = s3.fresh("lake")
    assert journal.unfinished_run(lake) is None and not journal.has_journal(lake)
    journal.begin(lake, "run-1")
    assert journal.unfinished_run(lake) == "run-1"
    journal.commit(lake, "run-1")
    assert journal.unfinished_run(lake) is None
    assert set(journal.published(lake)["versions"].values()) == {-1} and journal.published(lake)["run_id"] == "run-1"
    files.state(lake).write("inflight.json", '{"run_id": "r1", "vers')
    assert journal.unfinished_run(lake) == journal.UNREADABLE_JOURNAL


def test_what_a_landing_in_object_storage_lists(s3):
    landing = s3.fresh("landing")
    for key in ("messages/a.jsonl", "messages/2026/b.jsonl.gz", "messages/.c.jsonl.tmp", "messages/_tmp/d.jsonl",
                "messages/e.json", "workflow_events/f.jsonl", "notes.txt"):
        put(f"{landing}/{key}", b"{}\n")
    found = listing(landing)[0]
    assert [(f.stream, f.path.removeprefix(landing)) for f in found] == [
        ("messages", "/messages/2026/b.jsonl.gz"), ("messages", "/messages/a.jsonl"),
        ("workflow_events", "/workflow_events/f.jsonl")]
    assert all(f.size == 3 and f.modified_at > 0 and f.root == landing for f in found)
    assert unread(landing) == [f"messages/.c.jsonl.tmp ({HIDDEN_WHY})", f"messages/_tmp/d.jsonl ({HIDDEN_WHY})",
                               "notes.txt", "messages/e.json"]
