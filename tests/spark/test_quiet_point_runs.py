"""Key groups replayed from their last quiet point (`semantics/quiet.py`, `run/backends/replay.py`),
hand-worked, in three hourly runs on the driver backend (the Spark backend's twin: the property
test, which compares their scopes): a long-open subscription, a message whose TTL spans the hour,
a late record before the stored cluster's start, a start-event lock held across runs. Each run
replays each touched key group from the point worked out by hand, found from each group's last
cluster (since, until) before it, as worked out by hand, and gold is then the reference
model's of the records so far."""

from __future__ import annotations

from support.helpers import assert_gold_equals, read_gold, write_jsonl
from support.records import deploy, ended, left, msg, sub
from support.reference_model import reference

from correlake.run import pipeline
from correlake.run.backends import replay

M = 60  # a minute, in the records' seconds
H = 60 * M
BASE = 1_790_000_000  # seconds
T = "q"


def at(minutes: int) -> int:
    return BASE + minutes * M


RUNS = [
    ([msg(1, at(20), "a", "open", tenant=T),
      msg(2, at(30), "a", "ttl", ttl=2 * H * 1000, tenant=T),
      msg(3, at(5), "a", "late", ttl=20 * M * 1000, tenant=T), msg(4, at(50), "a", "late", ttl=0, tenant=T),
      msg(5, at(15), "s", "lock", ttl=H * 1000, tenant=T), msg(6, at(40), "s", "lock", ttl=3 * H * 1000, tenant=T)],
     [sub(1, at(10), "e-open", "a", "open", pik="i-open", etype="BOUNDARY_EVENT", interrupting=False, tenant=T),
      deploy(2, at(0), "S", starts=("s",), tenant=T)]),
    ([msg(7, at(70), "a", "open", tenant=T)],
     [sub(3, at(80), "e-ttl", "a", "ttl", pik="i-ttl", tenant=T),
      sub(4, at(10), "e-late", "a", "late", pik="i-late", tenant=T),  # before the stored cluster: all replayed
      ended(5, at(90), "msg-start:S:5", tenant=T)]),  # the lock passes to message 6 (rule 21)
    ([msg(8, at(150), "a", "open", ttl=0, tenant=T)],
     [left(6, at(130), "e-open", tenant=T), ended(7, at(165), "msg-start:S:6", tenant=T)]),
]
MS = 1000
# where each run replays each touched key group from, in minutes (None: its first record; run 1: no history)
REPLAYED = [{}, {"open": 10, "ttl": 30, "late": None, "lock": 15}, {"open": 10, "lock": 15}]
# (since, until) of each key's key group after runs 1 and 2, in minutes (None: something still lives),
# as the next run finds it
CLUSTERS = [
    {"open": (10, None), "ttl": (30, 150), "late": (50, 50), "lock": (15, None)},
    {"open": (10, None), "ttl": (30, 150), "late": (50, 50), "lock": (15, None)},
]


def millis(minutes: int | None) -> int | None:
    return None if minutes is None else (BASE + minutes * M) * MS


def test_runs_from_quiet_points_give_the_reference_gold(spark, tmp_path, monkeypatch):
    landing, lake = tmp_path / "landing", str(tmp_path / "lake")
    messages, events, points, clusters = [], [], [], {}
    found, cluster = replay.points, replay.last_cluster
    monkeypatch.setattr(replay, "points", lambda *args: points.append(found(*args)) or points[-1])
    monkeypatch.setattr(replay, "last_cluster", lambda records, *rows: clusters.setdefault(
        records[0]["label"] if records else None, cluster(records, *rows)))
    for n, (new_messages, new_events) in enumerate(RUNS):
        write_jsonl(landing / "messages" / f"m{n}.jsonl", new_messages)
        write_jsonl(landing / "workflow_events" / f"w{n}.jsonl", new_events)
        messages, events = messages + new_messages, events + new_events
        clusters.clear()
        assert pipeline.run(spark, str(landing), lake, max_quarantine_ratio=0.0, path="driver").path == "driver"
        assert points.pop() == {(T, key): millis(since) for key, since in REPLAYED[n].items() if since is not None}, \
            f"run {n + 1}"
        if n:  # each touched group's cluster before the run
            assert clusters == {key: (millis(since), millis(until)) for key, (since, until) in CLUSTERS[n - 1].items()
                                if key in REPLAYED[n]}, f"run {n + 1}"
        assert_gold_equals(read_gold(lake), reference(messages, events))
