"""Benchmark of `correlake deliver` (not run by CI; no Spark): two figures.

    .venv/bin/python scripts/benchmark_delivery.py [--idle-events 1000000] [--webhook-events 10000]
        [--keys 1000] [--partitions 8] [--out .local/bench-delivery]

idle: a pass with nothing due over an outbox of --idle-events events (written with
delta-rs, 4 per key), all ACKED in `delivery/state` but for 1,000 keys whose head waits for
a retry an hour away: the pass reads both tables, finds no due head and sends nothing.
Timed in this process (twice: cold, warm) and as a `correlake deliver` process.

webhook: --webhook-events events over --keys keys (so events/keys rounds) sent by one pass
to a receiver that deduplicates (tests/support/delivery_helpers.Receiver) in another process;
events/s and the pass's peak memory (its process's max RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark"), str(ROOT / "tests")]

import pyarrow as pa  # noqa: E402
from deltalake import write_deltalake  # noqa: E402
from support.delivery_helpers import TENANT, event, write_outbox  # noqa: E402

from correlake.config import table_path  # noqa: E402
from correlake.delivery import deliver  # noqa: E402
from correlake.delivery.tables import arrow_schema  # noqa: E402

CORRELAKE = [sys.executable, "-m", "correlake.interfaces.cli"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "spark")}  # this checkout's correlake
VARIABLES = {"orderId": "order-000000", "amount": 129.5, "currency": "EUR", "items": 3, "priority": "normal"}
WAITING_KEYS = 1000


def outbox(count: int, keys: int) -> list[dict]:
    per_key = max(count // keys, 1)
    return [event(TENANT, f"order-{k:07d}", s, k * per_key + s, VARIABLES) for k in range(keys)
            for s in range(1, per_key + 1)]


class Refuse:
    """A sink for a pass that must send nothing."""
    def drained(self, old: int) -> bool:
        return True

    def prepare(self, partitions: int) -> None:
        pass

    def send(self, events, until=None):
        raise AssertionError(f"{len(events)} events due in an idle pass")

    def close(self) -> None:
        pass


def idle(root: Path, count: int) -> dict:
    lake = root / "idle"
    shutil.rmtree(lake, ignore_errors=True)
    started = time.perf_counter()
    rows = outbox(count, count // 4)
    write_outbox(str(lake), rows)
    now = datetime.now(timezone.utc)
    waiting = {r["event_id"] for r in rows[: WAITING_KEYS * 4 : 4]}  # the first events of WAITING_KEYS keys
    later = {r["event_id"] for r in rows[: WAITING_KEYS * 4]} - waiting
    ids = [r["event_id"] for r in rows]
    status = ["AWAITED" if i in waiting else "PENDING" if i in later else "ACKED" for i in ids]
    state = pa.table({
        "event_id": ids, "status": status,
        "attempts": pa.array([0 if s == "PENDING" else 1 for s in status], pa.int32()),
        "next_attempt_at": pa.array([now + timedelta(hours=1) if s == "AWAITED" else None for s in status],
                                    pa.timestamp("us", tz="UTC")),
        "last_error": pa.array(["HTTP 503" if s == "AWAITED" else None for s in status], pa.string()),
        "updated_at": pa.array([now] * len(ids), pa.timestamp("us", tz="UTC")),
    }, schema=arrow_schema("delivery_state"))
    write_deltalake(table_path(str(lake), "delivery_state"), state)
    attempts = pa.table({"event_id": [i for i in ids if i not in later],
                         "attempt": pa.array([1] * (len(ids) - len(later)), pa.int32()),
                         "at": pa.array([now] * (len(ids) - len(later)), pa.timestamp("us", tz="UTC")),
                         "outcome": ["RETRY" if i in waiting else "ACK" for i in ids if i not in later],
                         "detail": pa.array([None] * (len(ids) - len(later)), pa.string())},
                        schema=arrow_schema("delivery_attempts"))
    write_deltalake(table_path(str(lake), "delivery_attempts"), attempts)
    built = time.perf_counter() - started
    passes = []
    for _ in range(2):
        t = time.perf_counter()
        result = deliver.deliver(str(lake), Refuse(), deliver.Settings())
        passes.append(round(time.perf_counter() - t, 2))
        assert result.tally["sent"] == 0, result
    t = time.perf_counter()
    out = subprocess.run([*CORRELAKE, "deliver", "--lake", str(lake), "--sink", "webhook", "--url",
                          "http://127.0.0.1:9/unused"], capture_output=True, text=True, check=True, env=ENV).stdout
    process = round(time.perf_counter() - t, 2)
    assert " 0 sent" in out, out
    return {"events": len(rows), "build_seconds": round(built, 1), "pass_seconds_in_process": passes,
            "pass_seconds_as_process": process, "summary": out.strip().splitlines()}


RECEIVER = """
import sys, time
sys.path[:0] = [{spark!r}, {tests!r}]
from support.delivery_helpers import Receiver
receiver = Receiver()
print(receiver.url, flush=True)
sys.stdin.read()
print(len(receiver.applied), len(receiver.requests), flush=True)
"""


def webhook(root: Path, count: int, keys: int, partitions: int) -> dict:
    lake = root / "webhook"
    shutil.rmtree(lake, ignore_errors=True)
    write_outbox(str(lake), outbox(count, keys))
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER.format(spark=str(ROOT / "spark"),
                                                                         tests=str(ROOT / "tests"))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = receiver.stdout.readline().strip()
    command = [*CORRELAKE, "deliver", "--lake", str(lake), "--sink", "webhook", "--url", url,
               "--partitions", str(partitions), "--max-seconds", "3600"]
    t = time.perf_counter()
    run = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True, check=True, env=ENV)
    seconds = time.perf_counter() - t
    applied, requests = map(int, receiver.communicate("", timeout=60)[0].split())
    summary = run.stdout.strip().splitlines()
    pass_seconds = float(summary[0].split(" in ")[1].split()[0])
    return {"events": count, "keys": keys, "partitions": partitions, "applied": applied, "requests": requests,
            "process_seconds": round(seconds, 1), "pass_seconds": pass_seconds,
            "events_per_second_of_pass": round(count / pass_seconds), "peak_rss_mb": int(run.stderr.split()[-1]) // 1024,
            "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-events", type=int, default=1_000_000)
    parser.add_argument("--webhook-events", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / ".local" / "bench-delivery")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"webhook": webhook(args.out, args.webhook_events, args.keys, args.partitions)}
    print(json.dumps(report, indent=1), flush=True)
    report["idle"] = idle(args.out, args.idle_events)
    print(json.dumps(report["idle"], indent=1))
    (args.out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
