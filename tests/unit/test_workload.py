"""The benchmarks' workload (`samples/workload.py`): its "ending" lives end, as the reference
model replays them: every subscription closes and every message-started instance ends."""

from __future__ import annotations

import json

from support.reference_model import reference

from correlake.samples.workload import BASE_MS, HOUR_MS, generate


def landed(landing, stream: str) -> list[dict]:
    return [json.loads(line) for path in sorted((landing / stream).rglob("*.jsonl"))
            for line in path.read_text().splitlines()]


def test_ending_lives_leave_nothing_alive(tmp_path):
    for hour in range(2):
        generate(tmp_path, 200, 200, "uniform", seed=hour + 1, files=2, first_position=1 + hour * 10 ** 6,
                 start_ms=BASE_MS + hour * HOUR_MS, key_count=40, lives="ending")
    gold = reference(landed(tmp_path, "messages"), landed(tmp_path, "workflow_events"))
    assert len(gold["subscriptions"]) > 100 and len(gold["message_started_instances"]) > 10
    assert [s for s in gold["subscriptions"] if s["closed_at"] is None] == []
    assert [i for i in gold["message_started_instances"] if i["ended_at"] is None] == []


def test_random_lives_leave_some_alive(tmp_path):
    generate(tmp_path, 200, 200, "uniform", files=2, key_count=40)
    gold = reference(landed(tmp_path, "messages"), landed(tmp_path, "workflow_events"))
    assert any(s["closed_at"] is None for s in gold["subscriptions"])
    assert any(i["ended_at"] is None for i in gold["message_started_instances"])
