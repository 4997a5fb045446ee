"""An idempotent consumer of correlake's RabbitMQ queues (pika).

    python examples/consumers/rabbitmq_consumer.py AMQP_URL LEDGER.sqlite [--partition I ...] [--partitions N]
                                                    [--until-applied N [--timeout SECONDS]]

It consumes one partition's queue (`--partition`, repeatable) or all N (`correlake.correlations.p0…`).
Each queue has a single active consumer: start as many copies as you like, one consumes a
partition at a time, in order, and another takes over when it goes away. For each message:
apply the event and record its id in the SQLite ledger in one transaction, then `basic_ack`;
an id already recorded (a redelivery) is acknowledged without being applied again. A consumer
that dies before acknowledging gets its messages redelivered to the next one. It runs until
interrupted, or until it has applied N events (`--until-applied`; duplicates do not count),
giving up with exit status 1 when that takes over `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pika
from ledger import open_ledger, parse_event, process_once

EXCHANGE = "correlake.correlations"  # the contract's names (docs/delivery.md, "RabbitMQ")
QUEUE_ARGUMENTS = {"x-queue-type": "quorum", "x-single-active-consumer": True}


def queue_name(partition: int) -> str:
    return f"{EXCHANGE}.p{partition}"


def consume(amqp_url: str, ledger: str | Path, partitions: list[int], *, prefetch: int = 100,
            until_applied: int | None = None, timeout: float | None = None, synchronous: str = "FULL",
            on_committed: Callable[[str, bool], None] = lambda event_id, applied: None) -> int:
    """Consume the partitions' queues until interrupted, or until `until_applied` events were
    applied (TimeoutError when that takes over `timeout` seconds): the number of messages
    handled. `on_committed(event_id, applied)` runs after the ledger's commit and before the
    acknowledgement; `synchronous`: the ledger's commits (ledger.py)."""
    conn = open_ledger(ledger, synchronous)
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=prefetch)
    handled = applied = 0

    def on_message(ch, method, properties, body: bytes) -> None:
        nonlocal handled, applied
        try:
            event = parse_event(body)
        except ValueError as error:  # never applicable: dropped (a dead-letter exchange, if set, keeps it)
            print(f"rejected message {properties.message_id}: {error}", file=sys.stderr)
            ch.basic_reject(method.delivery_tag, requeue=False)
            return
        fresh = process_once(conn, event, body)
        on_committed(event["event_id"], fresh)
        ch.basic_ack(method.delivery_tag)
        handled += 1
        applied += fresh

    for partition in partitions:  # declared as the sink does: either side may start first
        channel.queue_declare(queue_name(partition), durable=True, arguments=QUEUE_ARGUMENTS)
        channel.basic_consume(queue_name(partition), on_message)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        if until_applied is None:
            channel.start_consuming()
        while until_applied is not None and applied < until_applied:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{applied} of {until_applied} events applied within {timeout:g} s")
            connection.process_data_events(time_limit=min(left, 1.0))
    except KeyboardInterrupt:
        pass
    finally:
        if connection.is_open:
            connection.close()
        conn.close()
    return handled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("amqp_url")
    parser.add_argument("ledger", help="the SQLite file of processed event ids and effects")
    parser.add_argument("--partition", type=int, action="append", help="consume this partition (repeatable)")
    parser.add_argument("--partitions", type=int, default=8, help="without --partition: consume all N (default 8)")
    parser.add_argument("--until-applied", type=int, metavar="N", help="exit once N events were applied")
    parser.add_argument("--timeout", type=float, help="with --until-applied: exit 1 if that takes longer")
    args = parser.parse_args(argv)
    partitions = args.partition if args.partition else list(range(args.partitions))
    try:
        handled = consume(args.amqp_url, args.ledger, partitions, until_applied=args.until_applied,
                          timeout=args.timeout)
    except TimeoutError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"handled {handled} messages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
