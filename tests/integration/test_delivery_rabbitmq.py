"""The RabbitMQ sink on a real broker (tests/support/brokers.py), fed hand-built events: the contract's
declarations and message properties, in-partition order, single active consumer, the
outcomes (confirmed, returned, oversized, unreachable), `drained`, and two faults — the
broker SIGKILLed mid-send and a consumer SIGKILLed before acknowledging — after which the
idempotent example consumer (examples/consumers/) holds every event exactly once, in order.
The last tests run `correlake deliver --sink rabbitmq` passes over an outbox written with
delta-rs (no Spark): the broker killed mid-pass, and a change of the partition count.

Order is per ordering key (tenant_id, ordering_key): every workload has two tenants on
the same correlation keys, one's events of a key queued after the other's, so that an
order check by correlation key alone fails on it (each check asserts that it would).
Consumers stop once they applied the events expected, or fail the test after a timeout."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pika
import pytest
from deltalake import DeltaTable
from support.delivery_helpers import TENANT, by_key_alone, not_in_sequence, out_of_order, write_outbox
from support.delivery_helpers import event as outbox_row
from support.ports import refused_port

from correlake.config import PROJECT_ROOT, table_path
from correlake.delivery import amqp
from correlake.delivery.events import ACK, CORRELATED, REJECT, RETRY, Event, Outcome, partition_of
from correlake.delivery.rabbitmq import EXCHANGE, RabbitMQSink, queue_name
from correlake.errors import DeliveryError
from correlake.interfaces import cli

CONSUMERS = PROJECT_ROOT / "examples" / "consumers"
sys.path.insert(0, str(CONSUMERS))
from rabbitmq_consumer import consume  # noqa: E402

PARTITIONS = 4
FAST = "NORMAL"  # the ledger's commits survive a killed process (what these tests kill), without an fsync each
TENANTS = ("t1", "t2")
WAIT = 300  # seconds a consumer may take to get what it expects before the test fails (a busy machine is slow)


def event(key: str, sequence: int, partitions: int = PARTITIONS, *, size: int = 0, tenant: str = "t1") -> Event:
    partition = partition_of(tenant, key, partitions)
    event_id = f"{tenant}/{key}/{sequence}"
    body = json.dumps({"event_id": event_id, "kind": CORRELATED, "ordering_key": key, "sequence": sequence,
                       "partition": partition,
                       "tenant_id": tenant, "correlation_key": key, "message_key": sequence,
                       "process_instance_key": f"pi-{key}", "pad": "x" * size}).encode()
    return Event(event_id, CORRELATED, tenant, key, key, sequence, sequence, partition, body)


def rounds(keys: int, sequences: int) -> list[list[Event]]:
    """Each key's events 1…sequences, one round per sequence (as a pass sends a key's head
    only), tenant t1's rounds and then t2's: by correlation key alone, t2's 1 follows t1's last."""
    return [[event(f"k{k}", s, tenant=t) for k in range(keys)] for t in TENANTS for s in range(1, sequences + 1)]


class Lines:
    """Events waiting by ordering key, as a pass keeps them: a round sends every key's chain
    (its events not acknowledged, in sequence order) interleaved, as `Ledger.due` makes a
    pass's batch; an event acknowledged leaves."""

    def __init__(self, events: list[Event]):
        self.waiting: dict[tuple[str, str], list[Event]] = {}
        for e in sorted(events, key=lambda e: e.sequence):
            self.waiting.setdefault(e.line, []).append(e)

    def heads(self) -> list[Event]:
        return [line[0] for line in self.waiting.values()]

    def chains(self) -> list[Event]:
        lines, batch, depth = list(self.waiting.values()), [], 0
        while lines:
            batch += [line[depth] for line in lines]
            depth += 1
            lines = [line for line in lines if len(line) > depth]
        return batch

    def send_round(self, sink: RabbitMQSink) -> list[tuple[Event, Outcome]]:
        batch = self.chains()
        sent = list(zip(batch, sink.send(batch)))
        for event, outcome in sent:
            if outcome.verdict == ACK:
                self.waiting[event.line].remove(event)
                if not self.waiting[event.line]:
                    del self.waiting[event.line]
        return sent

    def send_all(self, sink: RabbitMQSink, rounds: int = 10) -> None:
        for _ in range(rounds):
            if not self.waiting:
                return
            outcomes = [o for _, o in self.send_round(sink) if o.verdict != ACK]
        if self.waiting:
            raise AssertionError(f"not acknowledged after {rounds} rounds: {outcomes[:3]}")


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


def get_all(url: str, queue: str, count: int) -> list[tuple[pika.BasicProperties, bytes]]:
    """The queue's `count` messages, and none more. A consumer (basic.get is refused on a
    single-active-consumer queue) taking one message at a time: a message more stays ready
    in the queue, where its message count shows it."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=1)
    got = []
    if count:
        for method, properties, body in channel.consume(queue, inactivity_timeout=WAIT):
            assert method is not None, f"{len(got)} of {count} messages from {queue} (none for {WAIT} s)"
            got.append((properties, body))
            if len(got) == count:
                break
            channel.basic_ack(method.delivery_tag)
        channel.cancel()  # before the last acknowledgement: nothing more is delivered to us
        channel.basic_ack(method.delivery_tag)
    left = channel.queue_declare(queue, passive=True).method.message_count
    connection.close()
    assert left == 0, f"{left} messages in {queue} after the {count} expected"
    return got


def effects(ledger) -> list[tuple[str, str, str, int]]:
    with sqlite3.connect(ledger) as conn:
        return conn.execute("SELECT event_id, tenant_id, ordering_key, sequence FROM effects "
                            "ORDER BY applied").fetchall()


def assert_exactly_once_in_order(ledger, sent: list[Event]) -> None:
    """Each event applied once, each ordering key's in sequence order; and the workload tells
    the tenants apart: by correlation key alone, the same effects are out of order."""
    applied = effects(ledger)
    assert Counter(e for e, *_ in applied) == Counter(e.event_id for e in sent)  # each once, none missing
    rows = [row[1:] for row in applied]
    assert out_of_order(rows) == {}
    assert out_of_order(by_key_alone(rows)), "by correlation key alone in order too: the workload cannot tell"


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
    received, alone = 0, {}
    for partition in range(PARTITIONS):
        got = get_all(broker.url, queue_name(partition), sum(e.partition == partition for e in flat))
        received += len(got)
        rows = []
        for properties, body in got:
            e = by_id[properties.message_id]
            assert (body, e.partition) == (e.body, partition)
            assert (properties.content_type, properties.delivery_mode) == ("application/json", 2)
            assert properties.headers == {"tenant_id": e.tenant_id, "correlation_key": e.correlation_key,
                                          "ordering_key": e.ordering_key, "sequence": e.sequence, "kind": e.kind}
            rows.append((e.tenant_id, e.ordering_key, e.sequence))
        assert not_in_sequence(rows) == {}  # each ordering key's 1, 2, 3 in order within the partition
        alone |= not_in_sequence(by_key_alone(rows))
    assert received == len(flat)
    assert alone, "by correlation key alone in sequence too: the workload cannot tell"


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

    with refused_port() as port:
        nowhere = RabbitMQSink(f"amqp://guest:guest@127.0.0.1:{port}/%2F", timeout=5)
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

    Lines(events).send_all(sink)
    pump_until(lambda: len(got[0]) + len(got[1]) >= len(events))
    active = 0 if got[0] else 1
    assert got[active] == [e.event_id for e in events] and got[1 - active] == []
    connections[active].close()  # the other one takes over
    more = [event(e.correlation_key, 2) for e in events]
    Lines(more).send_all(sink)
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
    get_all(broker.url, queue_name(event("k", 1).partition), 1)
    assert sink.drained(PARTITIONS)


@pytest.mark.kills_broker
def test_broker_killed_mid_send_then_restarted(broker, sink, tmp_path, monkeypatch):
    """Chains sent as a pass sends them (`Lines`): t2's first two events of every 4th key
    acknowledged before; then every key's events of t1 (one to three) and those keys' next two
    of t2, each key's chain in one go. The broker is SIGKILLed mid-send, with events of many
    keys in flight unconfirmed and later events of those keys in flight or unsent behind
    them. Those whose confirm never came are RETRY; the rounds go on after the restart, and
    each event is in effect once, each ordering key's in order: a key's later event kept by
    the broker while an earlier one was lost would be applied ahead of it, and fail the test."""
    keys = 6000
    earlier = [event(f"k{k}", s, size=300, tenant="t2") for k in range(0, keys, 4) for s in (1, 2)]
    later = [event(f"k{k}", s, size=300) for k in range(keys) for s in range(1, 2 + k % 3)]
    later += [event(f"k{k}", s, size=300, tenant="t2") for k in range(0, keys, 4) for s in (3, 4)]
    Lines(earlier).send_all(sink)
    lines = Lines(later)
    beam, confirmed = broker.beam_pid(), amqp.Link._confirmed

    def confirmed_then_crash(link, frame):  # the crash lands mid-send, whatever the machine's speed
        confirmed(link, frame)
        if frame.method.delivery_tag >= 1000 and broker.process.poll() is None:
            os.kill(beam, signal.SIGKILL)
            broker.process.wait(30)

    monkeypatch.setattr(amqp.Link, "_confirmed", confirmed_then_crash)
    crashing = RabbitMQSink(broker.url)  # its channel takes the patched callback
    second = lines.send_round(crashing)
    crashing.close()
    monkeypatch.undo()
    verdicts = Counter(o.verdict for _, o in second)
    assert verdicts[ACK] > 0 and verdicts[RETRY] > 0 and set(verdicts) == {ACK, RETRY}, verdicts
    assert all(o.detail.startswith(("not confirmed: connection lost", "not sent: connection lost"))
               for _, o in second if o.verdict == RETRY)
    in_flight = [e for e, o in second if o.detail.startswith("not confirmed")]
    # many keys' events in flight when the broker died (2000, the window, when measured)
    assert len(in_flight) >= 500, len(in_flight)
    behind = sum(len(lines.waiting[e.line]) > 1 and lines.waiting[e.line][0] is e for e in in_flight)
    assert behind >= 100, behind  # and behind many, the key's later events
    assert {o.verdict for o in sink.send(lines.heads()[:10])} == {RETRY}  # still down: RETRY, no exception
    broker.restart()
    lines.send_all(sink)
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), prefetch=500, until_applied=len(earlier) + len(later),
            timeout=WAIT, synchronous=FAST)
    assert_exactly_once_in_order(ledger, earlier + later)


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
        Lines(batch).send_all(sink)
    code = CHILD.format(consumers=str(CONSUMERS), url=broker.url, ledger=str(ledger), partition=partition, fast=FAST)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        assert len(effects(ledger)) == 5
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    flat = [e for batch in sent for e in batch]
    handled = consume(broker.url, ledger, [partition], until_applied=len(flat) - 5, timeout=WAIT, synchronous=FAST)
    assert handled == len(flat) - 4  # the 5th comes again (a duplicate, acknowledged unapplied)
    assert_exactly_once_in_order(ledger, flat)


# -- `correlake deliver --sink rabbitmq` ----------------------------------------------------
KEYS, SEQUENCES = 2000, 3
OUTBOX = [outbox_row(TENANT, f"order-{k}", s, k * 10 + s) for k in range(KEYS) for s in range(1, SEQUENCES + 1)]


def other_tenant(sequences) -> list[dict]:
    """Tenant t2's events `sequences` of every 4th of OUTBOX's correlation keys."""
    return [outbox_row("t2", f"order-{k}", s, 100_000 + k * 10 + s) for k in range(0, KEYS, 4) for s in sequences]


@pytest.fixture
def outbox_lake(tmp_path) -> str:
    lake = str(tmp_path / "lake")
    write_outbox(lake, OUTBOX)
    return lake


def deliver(lake: str, url: str, *options: str) -> int:
    return cli.main(["deliver", "--lake", lake, "--sink", "rabbitmq", "--amqp-url", url,
                     "--partitions", str(PARTITIONS), "--retry-base", "0.01", "--retry-cap", "0.05", *options])


def delivery_statuses(lake: str) -> Counter:
    return Counter(DeltaTable(table_path(lake, "delivery_state")).to_pyarrow_table().column("status").to_pylist())


def outbox_events(rows: list[dict]) -> list[Event]:
    """Outbox rows as events (what `assert_exactly_once_in_order` reads of them: their ids)."""
    return [Event(r["event_id"], r["kind"], r["tenant_id"], r["correlation_key"], r["ordering_key"], r["message_key"],
                  r["sequence"], r["partition"], r["payload"].encode()) for r in rows]


@pytest.mark.kills_broker
def test_a_pass_with_the_broker_killed_mid_pass(broker, tmp_path, monkeypatch, capsys):
    """A first run's events (t2's, of every 4th key) delivered; then the broker SIGKILLed
    while the next run's (OUTBOX) second batch is being sent: the pass ends with events to
    retry; after a restart the next pass delivers the rest; the consumer applies every outbox
    event once, each ordering key's in sequence order."""
    lake, earlier = str(tmp_path / "lake"), other_tenant((1, 2))
    write_outbox(lake, earlier)
    assert deliver(lake, broker.url) == 0
    write_outbox(lake, OUTBOX)
    real_send, confirmed, calls = RabbitMQSink.send, amqp.Link._confirmed, []

    def send(sink, events, until=None):
        calls.append(len(events))
        return real_send(sink, events, until)

    def confirmed_then_crash(link, frame):  # the second batch's first confirm: the rest are in flight or unsent
        confirmed(link, frame)
        if len(calls) == 2 and broker.running():
            broker.kill()

    monkeypatch.setattr(RabbitMQSink, "send", send)
    monkeypatch.setattr(amqp.Link, "_confirmed", confirmed_then_crash)
    assert deliver(lake, broker.url, "--max-seconds", "3") == 0
    assert not broker.running()
    after_kill = delivery_statuses(lake)
    assert after_kill["ACKED"] >= len(earlier) + KEYS and after_kill["AWAITED"] > 0, after_kill
    assert "events wait for a retry" in capsys.readouterr().out  # the last error named
    broker.restart()
    assert deliver(lake, broker.url) == 0
    assert delivery_statuses(lake) == {"ACKED": len(earlier) + len(OUTBOX)}
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), prefetch=500, until_applied=len(earlier) + len(OUTBOX),
            timeout=WAIT, synchronous=FAST)
    assert_exactly_once_in_order(ledger, outbox_events(earlier + OUTBOX))


def _policy(broker, queue: str, definition: str | None) -> None:
    """Set (or clear) a length limit on one queue, and wait until the queue has it."""
    done = (broker.ctl("set_policy", "--apply-to", "queues", "cap", f"^{re.escape(queue)}$", definition)
            if definition else broker.ctl("clear_policy", "cap"))
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        listed = broker.ctl("list_queues", "-q", "--no-table-headers", "name", "policy").stdout.split("\n")
        if any(line.split("\t")[0] == queue and (line.split("\t")[1:] == ["cap"]) == bool(definition)
               for line in listed if line):
            return
        time.sleep(0.2)
    raise AssertionError(f"policy on {queue} not applied")


CHAIN = 3000


def test_a_nack_in_the_middle_of_a_chain(broker, tmp_path, capsys):
    """A key's 3,000-event chain in one pass, its queue limited to 100 messages that refuses
    the rest (`overflow: reject-publish`, which a quorum queue applies a little late): the
    broker confirms a prefix of the chain and nacks the next; nothing of the key after it
    is confirmed (the later ones nacked too, or held back unsent). Once the limit is lifted,
    the next pass sends the chain on from there, and the idempotent consumer applies all
    once, in order (t2's events of the same key, in the same queue, after t1's first)."""
    lake = str(tmp_path / "lake")
    hot = next(k for k in (f"hot-{i}" for i in range(100)) if len({partition_of(t, k, PARTITIONS) for t in TENANTS}) == 1)
    rows = [outbox_row("t1", hot, s, s) for s in range(1, CHAIN + 1)]
    later = [outbox_row("t2", hot, s, CHAIN + s) for s in (1, 2)]  # a later run's, queued behind t1's first
    write_outbox(lake, rows)
    declared = RabbitMQSink(broker.url)
    declared.prepare(PARTITIONS)
    declared.close()
    queue = queue_name(partition_of("t1", hot, PARTITIONS))
    _policy(broker, queue, '{"max-length": 100, "overflow": "reject-publish"}')
    try:
        assert deliver(lake, broker.url, "--max-seconds", "2") == 0  # retried, and refused again, for 2 s
        assert "nacked by the broker" in capsys.readouterr().out
        chain = {r["event_id"]: r["sequence"] for r in rows}
        status = {chain[r["event_id"]]: r["status"] for r in DeltaTable(table_path(lake, "delivery_state"))
                  .to_pyarrow_table().to_pylist()}
        acked = sorted(s for s, st in status.items() if st == "ACKED")
        assert acked == list(range(1, len(acked) + 1)) and 100 <= len(acked) < CHAIN, status  # a prefix
    finally:
        _policy(broker, queue, None)
    write_outbox(lake, later)
    rows += later
    assert deliver(lake, broker.url) == 0
    assert delivery_statuses(lake) == {"ACKED": len(rows)}
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), until_applied=len(rows), timeout=WAIT, synchronous=FAST)
    assert_exactly_once_in_order(ledger, outbox_events(rows))


def test_the_brokers_password_from_a_file_not_the_command_line(broker, outbox_lake, tmp_path, monkeypatch, capsys):
    """`--amqp-url` names the user only, the password is in the file CORRELAKE_SINK_PASSWORD_FILE
    names: the broker takes it; a wrong one is a refused login (exit 2) that never shows it."""
    user_only = broker.url.replace("guest:guest@", "guest@")
    wrong, right = tmp_path / "wrong", tmp_path / "right"
    wrong.write_text("n0t-the-Pa55\n")
    right.write_text("guest\n")
    monkeypatch.setenv("CORRELAKE_SINK_PASSWORD_FILE", str(wrong))
    assert deliver(outbox_lake, user_only) == 2
    shown = capsys.readouterr()
    assert "refused the login" in shown.err and "n0t-the-Pa55" not in shown.out + shown.err
    monkeypatch.setenv("CORRELAKE_SINK_PASSWORD_FILE", str(right))
    assert deliver(outbox_lake, user_only) == 0
    assert delivery_statuses(outbox_lake) == {"ACKED": len(OUTBOX)}
    assert deliver(outbox_lake, broker.url) == 2  # a password in the URL as well: which one is meant?
    assert "names its user and no password" in capsys.readouterr().err


def test_a_partition_change_waits_until_the_old_queues_are_drained(broker, outbox_lake, tmp_path, capsys):
    """Events routed by 4 partitions wait in their queues: a pass with 2 sends nothing; once
    a consumer emptied them, it sends each key's next event, and t2's first of every 4th key,
    by the new partitions."""
    assert deliver(outbox_lake, broker.url) == 0
    later = [outbox_row(TENANT, f"order-{k}", SEQUENCES + 1, k * 10 + SEQUENCES + 1) for k in range(KEYS)]
    later += other_tenant((1,))
    write_outbox(outbox_lake, later)  # a later run's events
    capsys.readouterr()
    assert deliver(outbox_lake, broker.url, "--partitions", "2") == 0
    assert "still holds events" in capsys.readouterr().out
    assert delivery_statuses(outbox_lake) == {"ACKED": len(OUTBOX)}  # nothing sent (nor registered)
    ledger = tmp_path / "ledger.sqlite"
    consume(broker.url, ledger, list(range(PARTITIONS)), prefetch=500, until_applied=len(OUTBOX), timeout=WAIT,
            synchronous=FAST)
    assert deliver(outbox_lake, broker.url, "--partitions", "2") == 0
    assert delivery_statuses(outbox_lake) == {"ACKED": len(OUTBOX) + len(later)}
    consume(broker.url, ledger, [0, 1], prefetch=500, until_applied=len(later), timeout=WAIT, synchronous=FAST)
    assert_exactly_once_in_order(ledger, outbox_events(OUTBOX + later))
