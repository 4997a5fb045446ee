"""Synthetic landing workloads for benchmarks and long-run measurements.

`generate` writes one batch: catch subscriptions (with ends and lefts) and publishes
over a key space, uniform or skewed; the first batch also deploys the processes. Its events
come in one of two shapes (`lives`): "random", each element instance's three events of a
random kind at random times in the hour (many subscriptions never close, message-started
instances never end: a key's state lives for ever); or "ending", as an engine whose
instances complete writes them: each element instance opened, then left within
`LIFE_MS`, and each message-started instance ended within it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from correlake.contract.enums import (
    BOUNDARY_EVENT,
    ELEMENT_LEFT,
    INSTANCE_ENDED,
    INTERMEDIATE_CATCH_EVENT,
    PROCESS_DEPLOYED,
    RECEIVE_TASK,
    SUBSCRIPTION_OPENED,
)
from correlake.semantics.start_events import start_instance_key

BASE_MS = 1_790_000_000_000
HOUR_MS = 3_600_000  # a batch's records span one hour
LIFE_MS = 1_800_000  # "ending" lives: an element or message-started instance ends within half an hour


def _keys(rng: random.Random, n: int, skew: str, count: int) -> list[str]:
    if skew == "uniform":
        return [f"k{rng.randrange(count)}" for _ in range(n)]
    if skew == "hot":
        return ["hot" if rng.random() < 0.05 else f"k{rng.randrange(count)}" for _ in range(n)]
    weights = [1 / (i + 1) ** 1.1 for i in range(count)]  # Zipf(1.1)
    return [f"k{i}" for i in rng.choices(range(count), weights=weights, k=n)]


def generate(landing: Path, messages: int, events: int, skew: str, seed: int = 1, files: int = 8,
             first_position: int = 1, start_ms: int = BASE_MS, key_count: int | None = None,
             tenant_id: str | None = None, lives: str = "random") -> None:
    """Catch subscriptions (with ends and lefts) and publishes over `key_count` keys (default: a
    quarter of the messages) in the hour from `start_ms`; the batch at position 1 deploys too,
    as does a batch given a tenant of its own (`tenant_id`, on every record; else the default).
    `lives`: the events' shape, "random" or "ending" (the module's docstring)."""
    rng = random.Random(seed)
    key_count = key_count or max(messages // 4, 1)
    pos = first_position
    msg_rows, ev_rows = [], []
    if first_position == 1 or tenant_id is not None:
        for p in ("order", "billing"):
            ev_rows.append({"position": pos, "type": PROCESS_DEPLOYED, "timestamp": start_ms - 1, "bpmn_process_id": p,
                            "process_version": 1, "message_start_events": ["start"] if p == "order" else []})
            pos += 1
    for i, key in enumerate(_keys(rng, messages, skew, key_count)):
        name = "start" if rng.random() < 0.1 else rng.choice(["pay", "ship", "cancel"])
        m = {"position": pos, "name": name, "correlation_key": key, "published_at": start_ms + rng.randrange(HOUR_MS),
             "ttl_ms": rng.choice([0, 60_000, 3_600_000])}
        if rng.random() < 0.1:
            m["message_id"] = f"id{i % 1000}"
        msg_rows.append(m)
        pos += 1
    if lives == "ending":
        ev_rows += _ending_lives(rng, msg_rows, events, skew, key_count, first_position, start_ms, pos)
    else:
        keys = _keys(rng, events // 3 + 1, skew, key_count)  # an element instance's subscriptions share a key
        for i in range(events):
            key = keys[i // 3]
            t = start_ms + rng.randrange(HOUR_MS)
            r = rng.random()
            eik = f"e{first_position}-{i // 3}"
            if r < 0.7:
                ev_rows.append(_opened(rng, pos, t, eik, key))
            elif r < 0.85:
                ev_rows.append({"position": pos, "type": ELEMENT_LEFT, "timestamp": t, "element_instance_key": eik})
            else:
                ev_rows.append({"position": pos, "type": INSTANCE_ENDED, "timestamp": t,
                                "process_instance_key": f"p{eik}"})
            pos += 1
    if tenant_id is not None:
        for row in msg_rows + ev_rows:
            row["tenant_id"] = tenant_id
    for stream, rows in (("messages", msg_rows), ("workflow_events", ev_rows)):
        folder = landing / stream / f"batch-{first_position:012d}"  # lexically ordered: docs/design.md *Discovery*
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(files):
            with open(folder / f"part-{f}.jsonl", "w") as out:
                out.writelines(json.dumps(r) + "\n" for r in rows[f::files])


def _opened(rng: random.Random, position: int, t: int, eik: str, key: str) -> dict:
    """A catch subscription of element instance `eik` (of instance `p<eik>`) opened at `t` on `key`."""
    return {"position": position, "type": SUBSCRIPTION_OPENED, "timestamp": t,
            "bpmn_process_id": rng.choice(["order", "billing"]), "process_instance_key": f"p{eik}",
            "element_instance_key": eik,
            "element_type": rng.choice([INTERMEDIATE_CATCH_EVENT, RECEIVE_TASK, BOUNDARY_EVENT]),
            "message_name": rng.choice(["pay", "ship", "cancel"]), "correlation_key": key,
            "interrupting": rng.random() < 0.8}


def _ending_lives(rng: random.Random, msg_rows: list[dict], events: int, skew: str, key_count: int,
                  first_position: int, start_ms: int, pos: int) -> list[dict]:
    """`events` events of lives that end (`LIFE_MS`): each element instance's subscription
    opened and the element left, each message-started instance (of a "start" message) ended."""
    rows = []
    starts = [m for m in msg_rows if m["name"] == "start"]
    instances = max(events - len(starts), 0) // 2
    for i, key in enumerate(_keys(rng, instances, skew, key_count)):
        t, eik = start_ms + rng.randrange(HOUR_MS), f"e{first_position}-{i}"
        rows.append(_opened(rng, pos, t, eik, key))
        rows.append({"position": pos + 1, "type": ELEMENT_LEFT, "timestamp": t + rng.randrange(1, LIFE_MS),
                     "element_instance_key": eik})
        pos += 2
    for m in starts:
        rows.append({"position": pos, "type": INSTANCE_ENDED,
                     "timestamp": m["published_at"] + rng.randrange(1, LIFE_MS),
                     "process_instance_key": start_instance_key("order", m["position"])})
        pos += 1
    return rows


def micro_batch(landing: Path, pairs: int, first_position: int, start_ms: int, tag: str) -> None:
    """A micro-batch as a continuous producer lands it: `pairs` catch subscriptions opened on
    keys of their own, and a message for each a second later (`pairs` correlations), one
    file per stream, named by `tag`."""
    events, messages = [], []
    for i in range(pairs):
        key, eik = f"{tag}-k{i}", f"{tag}-e{i}"
        events.append({"position": first_position + 2 * i, "type": SUBSCRIPTION_OPENED, "timestamp": start_ms + i,
                       "bpmn_process_id": "order", "process_instance_key": f"p{eik}", "element_instance_key": eik,
                       "element_type": INTERMEDIATE_CATCH_EVENT, "message_name": "pay", "correlation_key": key,
                       "interrupting": True})
        messages.append({"position": first_position + 2 * i + 1, "name": "pay", "correlation_key": key,
                         "published_at": start_ms + 1000 + i, "ttl_ms": 60_000})
    for stream, rows in (("messages", messages), ("workflow_events", events)):
        folder = landing / stream
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{tag}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
