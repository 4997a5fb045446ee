"""Benchmark: the RabbitMQ sink publishing events with publisher confirms.

    .venv/bin/python scripts/benchmark_rabbitmq.py [--events 100000] [--batch 100000] [--window 2000[,500...]]
        [--partitions 8] [--keys 25000] [--amqp-url URL] [--out .local/bench]

Not run by CI. Without --amqp-url it starts a throwaway broker (tests/support/brokers.py: Debian's
rabbitmq-server on 127.0.0.1) and stops it after. Each --window (the most events in flight
unconfirmed) is measured in a fresh process, on empty queues: events/s over `send` calls of
--batch events each (every event confirmed), and the process's peak resident memory, with the
resident memory after building the events (before the first send) beside it.
Events look like the outbox's: one gold correlation's columns as JSON, about 500 bytes.
Then the same number of events as a whole `correlake deliver --sink rabbitmq` pass, in its
own process, over an outbox written with delta-rs (--keys keys, so events/keys rounds, each
recording its outcomes in the delivery tables): events/s and the process's peak memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def events(n: int, partitions: int) -> list:
    from correlake.delivery.events import CORRELATED, Event, partition_of

    made = []
    for i in range(n):
        key = f"order-{i}"
        partition = partition_of("<default>", key, partitions)
        body = {"event_id": f"{i:016x}{'0' * 48}", "kind": CORRELATED, "sequence": 1, "partition": partition,
                "message_key": i, "tenant_id": "<default>", "message_name": "payment-received",
                "correlation_key": key, "bpmn_process_id": "order-process", "process_version": 3,
                "process_instance_key": str(2251799813685248 + i), "element_instance_key": str(4503599627370496 + i),
                "element_id": "wait-for-payment", "subscription_type": "CATCH",
                "correlated_at": "2026-11-26T10:00:00.000Z", "message_published_at": "2026-11-26T09:59:59.123Z",
                "variables": {"amount": i % 1000, "currency": "EUR"}}
        made.append(Event(body["event_id"], CORRELATED, "<default>", key, key, i, 1, partition,
                          json.dumps(body, separators=(",", ":")).encode()))
    return made


def rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def measure(url: str, n: int, batch: int, window: int, partitions: int) -> dict:
    """In this process: send n events in batches, every one confirmed."""
    from correlake.delivery.events import ACK
    from correlake.delivery.rabbitmq import RabbitMQSink

    made = events(n, partitions)
    before = rss_mib()
    sink = RabbitMQSink(url, window=window)
    sink.prepare(partitions)
    start = time.perf_counter()
    acked = 0
    for i in range(0, n, batch):
        acked += sum(o.verdict == ACK for o in sink.send(made[i:i + batch]))
    seconds = time.perf_counter() - start
    sink.close()
    return {"events": n, "batch": batch, "window": window, "acked": acked, "seconds": round(seconds, 2),
            "events_per_s": round(n / seconds), "rss_before_send_mib": round(before, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "body_bytes": len(made[0].body)}


def measure_pass(url: str, n: int, keys: int, partitions: int) -> dict:
    """A `correlake deliver` process over an outbox of n events on `keys` keys."""
    sys.path[:0] = [str(ROOT / "tests")]
    from support.delivery_helpers import TENANT, event, write_outbox

    per_key = max(n // keys, 1)
    lake = Path(tempfile.mkdtemp(prefix="correlake-bench-pass-")) / "lake"
    write_outbox(str(lake), [event(TENANT, f"order-{k:07d}", s, k * per_key + s) for k in range(keys)
                             for s in range(1, per_key + 1)])
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "correlake.interfaces.cli", "deliver", "--lake", str(lake),
                               "--sink", "rabbitmq", "--amqp-url", url, "--partitions", str(partitions),
                               "--max-seconds", "600"], capture_output=True, text=True, check=True)
    finally:
        shutil.rmtree(lake.parent, ignore_errors=True)
    seconds = time.perf_counter() - start
    return {"pass_events": keys * per_key, "keys": keys, "seconds": round(seconds, 2),
            "events_per_s": round(keys * per_key / seconds),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "summary": done.stdout.strip().splitlines()}


def purge(url: str, partitions: int) -> None:
    import pika

    from correlake.delivery.rabbitmq import queue_name

    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    for i in range(partitions):
        channel.queue_delete(queue_name(i))
    connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100_000, help="events per send call")
    parser.add_argument("--window", default="2000", help="comma-separated: unconfirmed events in flight")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--keys", type=int, default=25_000, help="the pass's ordering keys")
    parser.add_argument("--amqp-url", help="a broker to use (default: start a throwaway one)")
    parser.add_argument("--out", default=str(ROOT / ".local" / "bench"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one measurement, in a fresh process (its own peak memory)
        print(json.dumps(measure(args.amqp_url, args.events, args.batch, int(args.window), args.partitions)))
        return 0
    node = None
    if not args.amqp_url:
        sys.path.insert(0, str(ROOT / "tests"))
        from support.brokers import RabbitNode

        node = RabbitNode(Path(tempfile.mkdtemp(prefix="correlake-bench-rabbitmq-")), max_message_size=16 << 20)
        node.start()
        args.amqp_url = node.url
    results = []
    try:
        for window in args.window.split(","):
            purge(args.amqp_url, args.partitions)
            done = subprocess.run([sys.executable, __file__, "--child", "--amqp-url", args.amqp_url,
                                   "--events", str(args.events), "--batch", str(args.batch), "--window", window,
                                   "--partitions", str(args.partitions)], capture_output=True, text=True, check=True)
            results.append(json.loads(done.stdout.splitlines()[-1]))
            print(json.dumps(results[-1]))
        purge(args.amqp_url, args.partitions)
        results.append(measure_pass(args.amqp_url, args.events, args.keys, args.partitions))
        print(json.dumps(results[-1]))
        purge(args.amqp_url, args.partitions)
    finally:
        if node is not None:
            node.stop()
            shutil.rmtree(node.root, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rabbitmq.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
