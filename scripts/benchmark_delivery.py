"""Benchmark of `correlake deliver` (not run by CI; no Spark): the figures of delivery's targets.

    .venv/bin/python scripts/benchmark_delivery.py [--keys 20000] [--hot 3000] [--empty 4000]
        [--idle-events 1000000] [--partitions 8] [--only rabbitmq,webhook,idle] [--out .local/bench-delivery]

The workload (written with delta-rs, as runs publish it): --keys keys with 1 to 6 events
each, --empty messages with an empty correlation key (each its own ordering key,
`#<message_key>`), and one key with a --hot-event chain; ~77,000 events by default.

rabbitmq: one default `correlake deliver --sink rabbitmq` process (8 partitions, a throwaway
broker of tests/support/brokers.py): whether every event went in that one pass, events/s
including the process's start, its peak memory; then the same outbox in this process through
a sink that times each batch: the hot key's chain rate, its events over the seconds of the
batches that carried them (a lower bound: those batches carried other keys' events too).

webhook: the same outbox to a receiver answering at once (tests/support/delivery_helpers.
Receiver, in another process): events/s including the process's start, and the hot key's
chain rate from the receiver's clock (its first to its last request).

idle: a pass with nothing due over an outbox of --idle-events events (4 per key), all ACKED
in `delivery/state` but for 1,000 keys whose head waits for a retry an hour away: the pass
reads what is open and sends nothing. Timed in this process (twice: cold, warm) and as a
`correlake deliver` process, with its peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark"), str(ROOT / "tests")]

import pyarrow as pa  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402
from support.delivery_helpers import TENANT, event, write_outbox  # noqa: E402

from correlake.config import table_path  # noqa: E402
from correlake.delivery import deliver  # noqa: E402
from correlake.delivery.tables import arrow_schema  # noqa: E402

CORRELAKE = [sys.executable, "-m", "correlake.interfaces.cli"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "spark")}  # this checkout's correlake
VARIABLES = {"orderId": "order-000000", "amount": 129.5, "currency": "EUR", "items": 3, "priority": "normal"}
WAITING_KEYS = 1000
HOT = "customer-hot"


def workload(keys: int, hot: int, empty: int) -> list[dict]:
    rows = [event(TENANT, f"order-{k:07d}", s, k * 10 + s, VARIABLES) for k in range(keys) for s in range(1, 2 + k % 6)]
    rows += [event(TENANT, "", 1, 10 * keys + m, VARIABLES) for m in range(empty)]
    rows += [event(TENANT, HOT, s, 20 * keys + s, VARIABLES) for s in range(1, hot + 1)]
    return rows


def statuses(lake: Path) -> dict:
    return dict(Counter(DeltaTable(table_path(str(lake), "delivery_state")).to_pyarrow_table()
                        .column("status").to_pylist()))


def timed_process(command: list[str]) -> tuple[float, int, list[str]]:
    """(seconds including the process's start, its peak RSS in MiB, its summary lines)."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True, check=True, env=ENV)
    return time.perf_counter() - started, int(done.stderr.split()[-1]) // 1024, done.stdout.strip().splitlines()


def fresh_lake(root: Path, name: str, rows: list[dict]) -> Path:
    lake = root / name
    shutil.rmtree(lake, ignore_errors=True)
    write_outbox(str(lake), rows)
    return lake


def rabbitmq(root: Path, rows: list[dict], partitions: int) -> dict:
    from support.brokers import RabbitNode

    from correlake.delivery.rabbitmq import RabbitMQSink

    node = RabbitNode(Path(tempfile.mkdtemp(prefix="correlake-bench-rabbitmq-")))
    node.start()
    try:
        lake = fresh_lake(root, "rabbitmq", rows)
        seconds, rss, summary = timed_process([*CORRELAKE, "deliver", "--lake", str(lake), "--sink", "rabbitmq",
                                               "--amqp-url", node.url, "--partitions", str(partitions)])
        figures = {"events": len(rows), "one_pass_statuses": statuses(lake), "process_seconds": round(seconds, 1),
                   "events_per_s_with_start": round(len(rows) / seconds), "peak_rss_mib": rss, "summary": summary}
        batches = []

        class Timed(RabbitMQSink):
            def send(self, events, until=None):
                started = time.perf_counter()
                outcomes = super().send(events, until)
                batches.append((sum(e.ordering_key == HOT for e in events), time.perf_counter() - started))
                return outcomes

        lake = fresh_lake(root, "rabbitmq-timed", rows)
        sink = Timed(node.url)
        try:
            deliver.deliver(str(lake), sink, deliver.Settings(partitions=partitions))
        finally:
            sink.close()
        carrying = [(n, s) for n, s in batches if n]
        figures |= {"hot_chain_batches": len(carrying),
                    "hot_chain_events_per_s_at_least": round(sum(n for n, _ in carrying) / sum(s for _, s in carrying))}
        return figures
    finally:
        node.stop()


RECEIVER = """
import sys, time
sys.path[:0] = [{spark!r}, {tests!r}]
from support.delivery_helpers import Receiver
receiver = Receiver()
print(receiver.url, flush=True)
sys.stdin.read()
hot = [t for (_, _, key, _, _), t in zip(receiver.requests, receiver.times) if key == {hot!r}]
print(len(receiver.applied), len(receiver.requests), len(hot), hot[-1] - hot[0] if hot else 0, flush=True)
"""


def webhook(root: Path, rows: list[dict], partitions: int) -> dict:
    lake = fresh_lake(root, "webhook", rows)
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER.format(spark=str(ROOT / "spark"),
                                                                         tests=str(ROOT / "tests"), hot=HOT)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = receiver.stdout.readline().strip()
    seconds, rss, summary = timed_process([*CORRELAKE, "deliver", "--lake", str(lake), "--sink", "webhook", "--url",
                                           url, "--partitions", str(partitions), "--max-seconds", "3600"])
    applied, requests, hot, hot_seconds = receiver.communicate("", timeout=60)[0].split()
    return {"events": len(rows), "applied": int(applied), "requests": int(requests), "statuses": statuses(lake),
            "process_seconds": round(seconds, 1), "events_per_s_with_start": round(len(rows) / seconds),
            "hot_chain_events_per_s": round(int(hot) / max(float(hot_seconds), 1e-9)), "peak_rss_mib": rss,
            "summary": summary}


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
    keys = count // 4
    rows = [event(TENANT, f"order-{k:07d}", s, k * 4 + s, VARIABLES) for k in range(keys) for s in range(1, 5)]
    lake = fresh_lake(root, "idle", rows)
    now = datetime.now(timezone.utc)
    waiting = {r["event_id"] for r in rows[: WAITING_KEYS * 4: 4]}  # the first events of WAITING_KEYS keys
    later = {r["event_id"] for r in rows[: WAITING_KEYS * 4]} - waiting
    ids = [r["event_id"] for r in rows]
    status = ["AWAITED" if i in waiting else "PENDING" if i in later else "ACKED" for i in ids]
    utc = pa.timestamp("us", tz="UTC")
    write_deltalake(table_path(str(lake), "delivery_state"), pa.table({
        "event_id": ids, "status": status, "attempts": pa.array([0 if s == "PENDING" else 1 for s in status], pa.int32()),
        "next_attempt_at": pa.array([now + timedelta(hours=1) if s == "AWAITED" else None for s in status], utc),
        "last_error": pa.array(["HTTP 503" if s == "AWAITED" else None for s in status], pa.string()),
        "updated_at": pa.array([now] * len(ids), utc)}, schema=arrow_schema("delivery_state")))
    tried = [i for i in ids if i not in later]
    write_deltalake(table_path(str(lake), "delivery_attempts"), pa.table({
        "event_id": tried, "attempt": pa.array([1] * len(tried), pa.int32()), "at": pa.array([now] * len(tried), utc),
        "outcome": ["RETRY" if i in waiting else "ACK" for i in tried],
        "detail": pa.array([None] * len(tried), pa.string())}, schema=arrow_schema("delivery_attempts")))
    passes = []
    for _ in range(2):
        started = time.perf_counter()
        result = deliver.deliver(str(lake), Refuse(), deliver.Settings())
        passes.append(round(time.perf_counter() - started, 2))
        assert result.tally["sent"] == 0, result
    seconds, rss, summary = timed_process([*CORRELAKE, "deliver", "--lake", str(lake), "--sink", "webhook", "--url",
                                           "http://127.0.0.1:9/unused"])
    return {"events": len(rows), "pass_seconds_in_process": passes, "pass_seconds_as_process": round(seconds, 2),
            "peak_rss_mib": rss, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--hot", type=int, default=3_000)
    parser.add_argument("--empty", type=int, default=4_000)
    parser.add_argument("--idle-events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--only", default="rabbitmq,webhook,idle")
    parser.add_argument("--out", type=Path, default=ROOT / ".local" / "bench-delivery")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows, report = workload(args.keys, args.hot, args.empty), {}
    for name in args.only.split(","):
        report[name] = {"rabbitmq": lambda: rabbitmq(args.out, rows, args.partitions),
                        "webhook": lambda: webhook(args.out, rows, args.partitions),
                        "idle": lambda: idle(args.out, args.idle_events)}[name]()
        print(json.dumps({name: report[name]}, indent=1), flush=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
