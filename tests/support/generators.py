"""Hypothesis strategies: small random landing streams that exercise every rule,
and many of them combined into one landing (one tenant prefix each)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from .helpers import millis_to_iso, relabel

# The seed of the seeded property tests: set CORRELAKE_TEST_SEED to replay a failure (they print it).
SEED = int(os.environ.get("CORRELAKE_TEST_SEED", "39"))
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PROCESSES = ["P1", "P2"]
NAMES = ["a", "b"]
KEYS = ["k1", "k2", "", 7]
ELEMENT_TYPES = ["INTERMEDIATE_CATCH_EVENT", "RECEIVE_TASK", "BOUNDARY_EVENT", "EVENT_BASED_GATEWAY",
                 "EVENT_SUBPROCESS"]
# Owner element instances, each belonging to one process instance of one process.
OWNERS = [("e1", "P1", "i1"), ("e2", "P1", "i1"), ("e3", "P2", "i2"), ("e4", "P1", "i3"), ("e5", "P2", "i4")]


@dataclass(frozen=True)
class Profile:
    """What a case's records are drawn from."""
    mix: str = "OOOOLEDD"  # its workflow events: O opened, L element left, E instance ended, D deployed
    keys: tuple = tuple(KEYS)
    ttls: tuple = (None, 0, 700, 3000, 60_000)
    ends_only_started: bool = False  # every INSTANCE_ENDED names a message-started instance


EVERY_RULE = Profile()
# Message start events: few keys, long TTLs, deployments and many ends of message-started
# instances, so that the per-key lock is taken, blocks a message and passes it on (rules 19-21).
START_EVENTS = Profile(mix="DDEEEEOL", keys=("k1", "k1", "k2"), ttls=(None, 60_000), ends_only_started=True)


def _time(draw) -> int | str:
    ms = BASE_MS + draw(st.integers(0, 14)) * 500
    return ms if draw(st.booleans()) else millis_to_iso(ms)


@st.composite
def streams(draw, max_messages: int = 10, max_events: int = 14, profile: Profile = EVERY_RULE) -> dict:
    """One case: {'messages': [...], 'workflow_events': [...]} with unique positions."""
    n_m = draw(st.integers(0, max_messages))
    n_e = draw(st.integers(0, max_events))
    positions = draw(st.permutations(range(1, n_m + n_e + 1)))
    tenants = ["t1", "t2"] if draw(st.integers(0, 4)) == 0 else ["t1"]
    messages = []
    for pos in positions[:n_m]:
        m = {"position": pos, "name": draw(st.sampled_from(NAMES)),
             "correlation_key": draw(st.sampled_from(profile.keys)), "published_at": _time(draw),
             "variables": {"p": pos}, "tenant_id": draw(st.sampled_from(tenants))}
        ttl = draw(st.sampled_from(profile.ttls))
        if ttl is not None:
            m["ttl_ms"] = ttl
        message_id = draw(st.sampled_from([None, None, "", "x", "y"]))
        if message_id is not None:
            m["message_id"] = message_id
        messages.append(m)
    started = [f"msg-start:{p}:{m['position']}" for m in messages for p in PROCESSES]
    owners = OWNERS + [(f"s{i}", sk.split(":")[1], sk) for i, sk in enumerate(started[:4])]
    events = []
    for pos in positions[n_m:]:
        kind = draw(st.sampled_from(profile.mix))
        e = {"position": pos, "timestamp": _time(draw), "tenant_id": draw(st.sampled_from(tenants))}
        if kind == "O":
            eik, process, pik = draw(st.sampled_from(owners))
            element_type = draw(st.sampled_from(ELEMENT_TYPES))
            e.update(type="SUBSCRIPTION_OPENED", bpmn_process_id=process,
                     process_version=draw(st.sampled_from([1, 2])), process_instance_key=pik,
                     element_instance_key=eik, element_id=f"el-{pos}", element_type=element_type,
                     message_name=draw(st.sampled_from(NAMES)), correlation_key=draw(st.sampled_from(KEYS)),
                     interrupting=draw(st.booleans()))
        elif kind == "L":
            e.update(type="ELEMENT_LEFT", element_instance_key=draw(st.sampled_from(owners))[0])
        elif kind == "E":
            pool = started if started and (profile.ends_only_started or draw(st.booleans())) else [o[2] for o in owners]
            e.update(type="INSTANCE_ENDED", process_instance_key=draw(st.sampled_from(pool)))
        else:
            e.update(type="PROCESS_DEPLOYED", bpmn_process_id=draw(st.sampled_from(PROCESSES)),
                     process_version=draw(st.integers(1, 3)),
                     message_start_events=draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)))
        events.append(e)
    # exact replays: some records delivered twice
    messages += [dict(m) for m in messages if draw(st.integers(0, 9)) == 0]
    events += [dict(e) for e in events if draw(st.integers(0, 9)) == 0]
    return {"messages": messages, "workflow_events": events}


OFFSET = 1000


def combine(cases: list[dict]) -> tuple[list, list]:
    messages, events = [], []
    for i, case in enumerate(cases, start=1):
        messages += relabel(case["messages"], f"p{i:03d}", i * OFFSET)
        events += relabel(case["workflow_events"], f"p{i:03d}", i * OFFSET)
    return messages, events


def shuffled_chunks(messages: list, events: list, rnd, max_chunks: int, min_chunks: int = 2
                    ) -> list[tuple[list, list]]:
    """Both streams' records shuffled by `rnd` and cut at random into `min_chunks` to
    `max_chunks` chunks, each (messages, workflow events): what runs of a landing that grows receive."""
    records = [("m", r) for r in messages] + [("w", r) for r in events]
    rnd.shuffle(records)
    cuts = sorted(rnd.sample(range(1, len(records)), rnd.randint(min_chunks - 1, max_chunks - 1)))
    return [([r for s, r in part if s == "m"], [r for s, r in part if s == "w"])
            for part in (records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)]))]


def generate_cases(n: int, profile: Profile = EVERY_RULE, seed_: int = SEED) -> list[dict]:
    """n cases drawn by Hypothesis from `seed_` (collected, so that they share one pipeline run)."""
    cases: list[dict] = []

    @seed(seed_)
    @settings(max_examples=n, phases=[Phase.generate], deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(streams(profile=profile))
    def collect(case):
        cases.append(case)

    collect()
    return cases
