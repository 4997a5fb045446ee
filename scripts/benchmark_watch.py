"""Benchmark: `correlake watch` from a file's landing to the webhook's 200 (issue 65's (k)).

    .venv/bin/python scripts/benchmark_watch.py [--every 10] [--pairs 10] [--interval 3] [--minutes 3]
        [--out .local/bench-watch]

Not run by CI. Starts `correlake watch --every EVERY --sink webhook` on a fresh lake, with a
receiver that deduplicates by event id (tests/support/delivery_helpers.Receiver) in this
process; lands a warm-up micro-batch and waits for its events; then lands a micro-batch
every INTERVAL seconds for MINUTES minutes (`samples/workload.micro_batch`: PAIRS
subscriptions and a message for each, PAIRS correlations), each file pair written to a
temporary name and renamed into the landing (so watch never reads half a file). Measures,
per delivered event, the seconds from its batch's landing to the receiver's 200: p50, p90,
p99, max; and checks every event came once and in order per ordering key. Stops watch with
SIGTERM (exit 0 expected). Writes report.json under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark"), str(ROOT / "tests")]

from support.delivery_helpers import Receiver, not_in_sequence  # noqa: E402

from correlake.samples.workload import micro_batch  # noqa: E402

CORRELAKE = str(Path(sys.executable).with_name("correlake"))
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def land(landing: Path, staging: Path, pairs: int, batch: int) -> None:
    """Batch `batch`'s file pair, written aside then moved into the landing."""
    tag = f"b{batch:04d}"
    micro_batch(staging, pairs, 1_000_000 * (batch + 1), START_MS + batch * 10_000, tag)
    for stream in ("workflow_events", "messages"):
        target = landing / stream / f"{tag}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / stream / f"{tag}.jsonl", target)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))], 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=float, default=10)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--interval", type=float, default=3)
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / ".local" / "bench-watch")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    landing, lake, staging = args.out / "landing", args.out / "lake", args.out / "staging"
    for folder in (landing / "messages", landing / "workflow_events", staging):
        folder.mkdir(parents=True, exist_ok=True)
    receiver = Receiver()
    log = open(args.out / "watch.log", "w")
    watch = subprocess.Popen([CORRELAKE, "watch", "--landing", str(landing), "--lake", str(lake), "--every",
                              str(args.every), "--sink", "webhook", "--url", receiver.url], stdout=log,
                             stderr=subprocess.STDOUT, env={**os.environ, "CORRELAKE_KEEP_DRIVER": "0"})
    landed: dict[int, float] = {}  # batch -> monotonic time of its landing
    try:
        land(landing, staging, args.pairs, 0)
        landed[0] = time.monotonic()
        deadline = time.monotonic() + 600
        while len(receiver.applied) < args.pairs and time.monotonic() < deadline:
            time.sleep(0.5)
        warm = round(time.monotonic() - landed[0], 1)
        batch, end = 1, time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            land(landing, staging, args.pairs, batch)
            landed[batch] = time.monotonic()
            batch += 1
            time.sleep(max(0.0, landed[batch - 1] + args.interval - time.monotonic()))
        expected = batch * args.pairs
        deadline = time.monotonic() + 300
        while len(receiver.applied) < expected and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        watch.send_signal(signal.SIGTERM)
        code = watch.wait(120)
        log.close()
    with receiver.lock:
        requests, times = list(receiver.requests), list(receiver.times)
    first: dict[str, float] = {}
    for (event_id, _, key, _, status), at in zip(requests, times):
        if 200 <= status < 300 and event_id not in first:
            first[event_id] = (at, int(key.split("-")[0][1:]))  # ordering key "b0007-k3": batch 7
    latencies = [at - landed[b] for at, b in first.values() if b > 0]
    report = {"every_s": args.every, "pairs": args.pairs, "interval_s": args.interval, "minutes": args.minutes,
              "batches": batch - 1, "warm_up_batch_s": warm, "events_expected": expected,
              "events_applied": len(first), "requests": len(requests),
              "in_order": not_in_sequence(receiver.applied_rows()) == {}, "watch_exit": code,
              "landing_to_200_s": {"p50": percentile(latencies, 50), "p90": percentile(latencies, 90),
                                   "p99": percentile(latencies, 99), "max": round(max(latencies), 2),
                                   "mean": round(statistics.mean(latencies), 2)} if latencies else None}
    receiver.close()
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
