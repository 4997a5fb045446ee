"""The RabbitMQ sink on a real broker (tests/support/brokers.py), fed hand-built events: the contract's
declarations and message properties, in-partition order, single active consumer, the
outcomes (confirmed, returned, oversized, unreachable), `drained`, and two faults — the
broker SIGKILLed mid-send and a consumer SIGKILLed before acknowledging — after which the
idempotent example consumer (examples/consumers/) holds every event exactly once, in order.
The last tests run `correlake deliver --sink rabbitmq` passes over an outbox written with
delta-rs (no Spark): the broker killed mid-pass, and a change of the partition count."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict

import pika
import pytest

from correlake.config import PROJECT_ROOT
from correlake.delivery.events import ACK, CORRELATED, REJECT, RETRY, Event, partition_of
from correlake.delivery import rabbitmq
from correlake.delivery.rabbitmq import EXCHANGE, RabbitMQSink, queue_name
from correlake.errors import DeliveryError
from correlake.interfaces import cli
from support.delivery_helpers import TENANT, write_outbox
from support.delivery_helpers import event as outbox_row
from support.helpers import free_port

CONSUMERS = PROJECT_ROOT / "examples" / "consumers"
sys.path.insert(0, str(CONSUMERS))
from rabbitmq_consumer import consume  # noqa: E402

PARTITIONS = 4
FAST = "NORMAL"  # the ledger's commits survive a killed process (what these tests kill), without an fsync each


def event(key: str, sequence: int, partitions: int = PARTITIONS, *, size: int = 0, tenant: str = "t1") -> Event:
    partition = partition_of(tenant, key, partitions)
    event_id = f"{tenant}/{key}/{sequence}"
    body = json.dumps({"event_id": event_id, "kind": CORRELATED, "sequence": sequence, "partition": partition,
                       "tenant_id": tenant, "correlation_key": key, "message_key": sequence,
                       "process_instance_key": f"pi-{key}", "pad": "x" * size}).encode()
    return Event(event_id, CORRELATED, tenant, key, sequence, sequence, partition, body)


def rounds(keys: int, sequences: int) -> list[list[Event]]:
    """Each key's events 1…sequences, one round per sequence (as a pass sends a key's head only)."""
    return [[event(f"k{k}", s) for k in range(keys)] for s in range(1, sequences + 1)]


@pytest.fixture
def broker(rabbitmq, request):
    """The session's node (up again if a test left it killed), with none of the sink's exchange
    and queues left by another test. For a test marked `kills_broker` the topology is declared,
    and on disk in the quorum queues' registry (`save_queue_registry`), before it starts: the
    node then recovers from the SIGKILL as from any crash, whatever the tests before declared."""
    if request.node.get_closest_marker("kills_broker"):
        declared = RabbitMQSink(rabbitmq.url)
        declared.prepare(PARTITIONS)
        declared.close()
        rabbitmq.save_queue_registry()
    yield rabbitmq
    if not rabbitmq.running():
        rabbitmq.restart()
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.url))
    channel = connection.channel()
    for i in range(16):
        channel.queue_delete(queue_name(i))
    channel.exchange_delete(EXCHANGE)
    connection.close()


@pytest.fixture
def sink(broker):
    sink = RabbitMQSink(broker.url)
    sink.prepare(PARTITIONS)
    yield sink
    sink.close()


def send_until_acked(sink: RabbitMQSink, events: list[Event], tries: int = 5) -> None:
    for _ in range(tries):
        outcomes = sink.send(events)
        events = [e for e, o in zip(events, outcomes) if o.verdict != ACK]
        if not events:
            return
    raise AssertionError(f"not acknowledged after {tries} sends: {outcomes[:3]}")


def get_all(url: str, queue: str) -> list[tuple[pika.BasicProperties, bytes]]:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    got = []  # basic.get is refused on a single-active-consumer queue: consume until a second of quiet
    for method, properties, body in channel.consume(queue, auto_ack=True, inactivity_timeout=1):
        if method is None:
            break
        got.append((properties, body))
    connection.close()
    return got


def effects(ledger) -> list[tuple[str, str, int]]:
    with sqlite3.connect(ledger) as conn:
        return conn.execute("SELECT event_id, correlation_key, sequence FROM effects ORDER BY applied").fetchall()


def assert_exactly_once_in_order(ledger, sent: list[Event]) -> None:
    applied = effects(ledger)
    assert Counter(e for e, _, _ in applied) == Counter(e.event_id for e in sent)  # each once, none missing
    by_key = defaultdict(list)
    for _, key, sequence in applied:
        by_key[key].append(sequence)
    assert all(sequences == sorted(sequences) for sequences in by_key.values())


def test_declarations_match_the_contract(broker, sink):
    sink.prepare(PARTITIONS)  # a second time: idempotent
    queues = broker.ctl("list_queues", "-q", "--no-table-headers", "name", "type", "durable", "arguments").stdout
    rows = sorted(line.split("\t") for line in queues.strip().splitlines())
    assert [r[0] for r in rows] == [queue_name(i) for i in range(PARTITIONS)]
    for _, kind, durable, arguments in rows:
        assert (kind, durable) == ("quorum", "true")
        assert '{"x-single-active-consumer",true}' in arguments and '{"x-queue-type","quorum"}' in arguments
    exchanges = broker.ctl("list_exchanges", "-q", "--no-table-headers", "name", "type", "durable").stdout
    assert f"{EXCHANGE}\tdirect\ttrue" in exchanges.splitlines()
    bindings = broker.ctl("list_bindings", "-q", "--no-table-headers", "source_name", "destination_name",
                          "routing_key").stdout.splitlines()
    assert sorted(b for b in bindings if b.startswith(EXCHANGE)) == sorted(
        f"{EXCHANGE}\t{queue_name(i)}\tp{i}" for i in range(PARTITIONS))


def test_a_refused_declaration_is_a_delivery_error(broker):
    connection = pika.BlockingConnection(pika.URLParameters(broker.url))
    connection.channel().queue_declare(queue_name(1), durable=True)  # a classic queue of the contract's name
    connection.close()
    sink = RabbitMQSink(broker.url)
    with pytest.raises(DeliveryError, match=r"refused a declaration: .*406 PRECONDITION_FAILED - inequivalent arg"):
        sink.prepare(PARTITIONS)
    sink.close()


def test_events_arrive_with_the_contracts_properties_in_order(broker, sink):
    sent = rounds(keys=12, sequences=3)
    for batch in sent:
        assert [o.verdict for o in sink.send(batch)] == [ACK] * len(batch)
    flat = [e for batch in sent for e in batch]
    by_id = {e.event_id: e for e in flat}
    received = 0
    for partition in range(PARTITIONS):
        got = get_all(broker.url, queue_name(partition))
        received += len(got)
        last: dict[str, int] = {}
        for properties, body in got:
            e = by_id[properties.message_id]
            assert (body, e.partition) == (e.body, partition)
            assert (properties.content_type, properties.delivery_mode) == ("application/json", 2)
            assert properties.headers == {"tenant_id": e.tenant_id, "correlation_key": e.correlation_key,
                                          "sequence": e.sequence, "kind": e.kind}
            assert e.sequence == last.get(e.correlation_key, 0) + 1  # in order within the partition
            last[e.correlation_key] = e.sequence
    assert received == len(flat)


def test_outcomes_returned_oversized_unreachable_and_bad_credentials(broker, sink):
    ok, unroutable = event("a", 1), event("b", 1)
    unroutable = dataclasses.replace(unroutable, partition=40)  # no queue is bound to p40
    oversized = event("c", 1, size=2 << 20)  # over the node's max_message_size (1 MiB)
    after = event("d", 1)
    outcomes = sink.send([ok, unroutable, oversized, after])
    assert [o.verdict for o in outcomes] == [ACK, RETRY, REJECT, ACK]
    assert "unroutable" in outcomes[1].detail and "NO_ROUTE" in outcomes[1].detail
    assert "max message size 1048576" in outcomes[2].detail
    assert sink.send([event("e", 1, size=2 << 20)])[0].verdict == REJECT  # known now: not even published

    nowhere = RabbitMQSink(f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F", timeout=5)
    nowhere.prepare(PARTITIONS)  # unreachable is not a configuration error: its sends are retried
    [outcome] = nowhere.send([event("f", 1)])
    assert outcome.verdict == RETRY and "unreachable" in outcome.detail
    nowhere.close()

    with pytest.raises(DeliveryError, match="bad AMQP URL"):
        RabbitMQSink("amqp://guest:guest@127.0.0.1:notaport/")
    secret = "s3cret-Pa55"
    wrong = RabbitMQSink(broker.url.replace("guest:guest", f"guest:{secret}"))
    with pytest.raises(DeliveryError, match="refused the login") as refused:
        wrong.prepare(PARTITIONS)
    assert secret not in str(refused.value) and "guest:***@" in str(refused.value)
    wrong.close()


def test_one_active_consumer_per_partition(broker, sink):
    connections = [pika.BlockingConnection(pika.URLParameters(broker.url)) for _ in range(2)]
    got: list[list[str]] = [[], []]
    for n, connection in enumerate(connections):
        channel = connection.channel()
        channel.basic_consume(queue_name(0), lambda ch, m, p, b, n=n: (got[n].append(p.message_id),
                                                                       ch.basic_ack(m.delivery_tag)))
    events = [e for e in rounds(keys=40, sequences=1)[0] if e.partition == 0]

    def pump_until(done, timeout: float = 60) -> None:  # events, not a time window: a busy machine is slow
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            for connection in connections:
                if connection.is_open:
                    connection.process_data_events(time_limit=0.1)

    send_until_acked(sink, events)
    pump_until(lambda: len(got[0]) + len(got[1]) >= len(events))
    active = 0 if got[0] else 1
    assert got[active] == [e.event_id for e in events] and got[1 - active] == []
    connections[active].close()  # the other one takes over
    more = [event(e.correlation_key, 2) for e in events]
    send_until_acked(sink, more)
    pump_until(lambda: len(got[1 - active]) >= len(more))
    assert got[1 - active] == [e.event_id for e in more]
    connections[1 - active].close()


def test_a_connection_closed_between_sends_is_reopened(broker, sink):
    assert sink.send([event("a", 1)])[0].verdict == ACK
    assert broker.ctl("close_all_connections", "test").returncode == 0
    assert sink.send([event("a", 2)])[0].verdict == ACK  # noticed before sending: no needless RETRY


def test_drained(broker, sink):
    assert sink.drained(PARTITIONS) and sink.drained(16)  # empty, and queues never declared
    [outcome] = sink.send([event("k", 1)])
    assert outcome.verdict == ACK and not sink.drained(PARTITIONS)
    get_all(broker.url, queue_name(event("k", 1).partition))
    assert sink.drained(PARTITIONS)


@pytest.mark.kills_broker
def test_broker_killed_mid_send_then_restarted(broker, sink, tmp_path, monkeypatch):
    """Events whose confirm never came are RETRY; resent after the restart, each is in effect once."""
    first = [event(f"k{k}", 1, size=300) for k in range(20_000)]
    beam, confirmed = broker.beam_pid(), rabbitmq._Link._confirmed

    def confirmed_then_crash(link, frame):  # the crash lands mid-send, whatever the machine's speed
        confirmed(link, frame)
        if frame.method.delivery_tag >= 1000 and broker.process.poll() is None:
            os.kill(beam, signal.SIGKILL)
            broker.process.wait(30)

    monkeypatch.setattr(rabbitmq._Link, "_confirmed", confirmed_then_crash)
    crashing = RabbitMQSink(broker.url)  # its channel takes the patched callback
    outcomes = crashing.send(first)
    crashing.close()
    monkeypatch.undo()
    verdicts = Counter(o.verdict for o in outcomes)
    assert verdicts[ACK] > 0 and verdicts[RETRY] > 0 and set(verdicts) == {ACK, RETRY}, verdicts
    assert all(o.detail.startswith(("not confirmed: connection lost", "not sent: connection lost"))
               for o in outcomes if o.verdict == RETRY)
    assert {o.verdict for o in sink.send(first[:10])} == {RETRY}  # still down: RETRY, no exception
    broker.restart()
    send_until_acked(sink, [e for e, o in zip(first, outcomes) if o.verdict == RETRY])
    second = [event(f"k{k}", 2) for k in range(0, 20_000, 100)]
    send_until_acked(sink, second)
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), prefetch=500, idle_exit=2, synchronous=FAST)
    assert_exactly_once_in_order(ledger, first + second)


CHILD = """
import os, signal, sys, time
sys.path.insert(0, {consumers!r})
from rabbitmq_consumer import consume
seen = []
def hold(event_id, applied):
    seen.append(event_id)
    if len(seen) == 5:  # committed the 5th, not acknowledged it, more prefetched: wait to be killed
        print("holding", flush=True)
        time.sleep(600)
consume({url!r}, {ledger!r}, [{partition}], prefetch=50, on_committed=hold, synchronous={fast!r})
"""


def test_consumer_killed_before_acknowledging(broker, sink, tmp_path):
    """A consumer SIGKILLed after committing but before acknowledging (its prefetched messages
    unacknowledged too): the next consumer gets them again and applies each once, in order."""
    partition, ledger = 0, tmp_path / "ledger.sqlite"
    sent = [[e for e in batch if e.partition == partition] for batch in rounds(keys=60, sequences=3)]
    for batch in sent:
        send_until_acked(sink, batch)
    code = CHILD.format(consumers=str(CONSUMERS), url=broker.url, ledger=str(ledger), partition=partition, fast=FAST)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        assert len(effects(ledger)) == 5
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    handled = consume(broker.url, ledger, [partition], idle_exit=2, synchronous=FAST)
    flat = [e for batch in sent for e in batch]
    assert handled == len(flat) - 4  # the 5th comes again (a duplicate, acknowledged unapplied)
    assert_exactly_once_in_order(ledger, flat)


# -- `correlake deliver --sink rabbitmq` ----------------------------------------------------
KEYS, SEQUENCES = 2000, 3
OUTBOX = [outbox_row(TENANT, f"order-{k}", s, k * 10 + s) for k in range(KEYS) for s in range(1, SEQUENCES + 1)]


@pytest.fixture
def outbox_lake(tmp_path) -> str:
    lake = str(tmp_path / "lake")
    write_outbox(lake, OUTBOX)
    return lake


def deliver(lake: str, url: str, *options: str) -> int:
    return cli.main(["deliver", "--lake", lake, "--sink", "rabbitmq", "--amqp-url", url,
                     "--partitions", str(PARTITIONS), "--retry-base", "0.01", "--retry-cap", "0.05", *options])


def delivery_statuses(lake: str) -> Counter:
    from deltalake import DeltaTable

    from correlake.config import table_path

    return Counter(DeltaTable(table_path(lake, "delivery_state")).to_pyarrow_table().column("status").to_pylist())


def outbox_events(rows: list[dict]) -> list[Event]:
    """Outbox rows as events (what `assert_exactly_once_in_order` reads of them: id, key, sequence)."""
    return [Event(r["event_id"], r["kind"], r["tenant_id"], r["correlation_key"], r["message_key"], r["sequence"],
                  r["partition"], r["payload"].encode()) for r in rows]


@pytest.mark.kills_broker
def test_a_pass_with_the_broker_killed_mid_pass(broker, outbox_lake, tmp_path, monkeypatch, capsys):
    """The broker SIGKILLed while the pass's second round is being sent: the pass ends with
    events to retry; after a restart the next pass delivers the rest; the consumer applies
    every outbox event once, each key's in sequence order."""
    real_send, confirmed, calls = RabbitMQSink.send, rabbitmq._Link._confirmed, []

    def send(sink, events):
        calls.append(len(events))
        return real_send(sink, events)

    def confirmed_then_crash(link, frame):  # the second round's first confirm: the rest are in flight or unsent
        confirmed(link, frame)
        if len(calls) == 2 and broker.running():
            broker.kill()

    monkeypatch.setattr(RabbitMQSink, "send", send)
    monkeypatch.setattr(rabbitmq._Link, "_confirmed", confirmed_then_crash)
    assert deliver(outbox_lake, broker.url, "--max-seconds", "3") == 0
    assert not broker.running()
    after_kill = delivery_statuses(outbox_lake)
    assert after_kill["ACKED"] >= KEYS and after_kill["AWAITED"] > 0, after_kill
    assert "to retry" in capsys.readouterr().out
    broker.restart()
    assert deliver(outbox_lake, broker.url) == 0
    assert delivery_statuses(outbox_lake) == {"ACKED": len(OUTBOX)}
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), prefetch=500, idle_exit=2, synchronous=FAST)
    assert_exactly_once_in_order(ledger, outbox_events(OUTBOX))


def test_a_partition_change_waits_until_the_old_queues_are_drained(broker, outbox_lake, tmp_path, capsys):
    """Events routed by 4 partitions wait in their queues: a pass with 2 sends nothing; once
    a consumer emptied them, it sends each key's next event by the new partitions."""
    assert deliver(outbox_lake, broker.url) == 0
    later = [outbox_row(TENANT, f"order-{k}", SEQUENCES + 1, k * 10 + SEQUENCES + 1) for k in range(KEYS)]
    write_outbox(outbox_lake, later)  # a later run's events
    capsys.readouterr()
    assert deliver(outbox_lake, broker.url, "--partitions", "2") == 0
    assert "still holds events" in capsys.readouterr().out
    assert delivery_statuses(outbox_lake) == {"ACKED": len(OUTBOX)}  # nothing sent (nor registered)
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), prefetch=500, idle_exit=2, synchronous=FAST)
    assert deliver(outbox_lake, broker.url, "--partitions", "2") == 0
    assert delivery_statuses(outbox_lake) == {"ACKED": len(OUTBOX) + len(later)}
    consume(broker.url, ledger, [0, 1], prefetch=500, idle_exit=2, synchronous=FAST)
    assert_exactly_once_in_order(ledger, outbox_events(OUTBOX + later))
