"""The RabbitMQ sink (AMQP 0-9-1 with pika): the contract's exchange and per-partition quorum
queues, persistent messages, and publisher confirms pipelined over one channel.

pika's SelectConnection runs in the caller's thread: each call drives its I/O loop until
what it waits for has happened (a declaration answered, every published event confirmed)
or the connection is gone. Up to `window` events are in flight unconfirmed at a time, so a
send of many events neither waits for each confirm nor holds them all in pika's buffers."""

from __future__ import annotations

import re
import time

import pika
from pika.exceptions import AMQPError

from correlake.delivery.amqp import Gone, Link
from correlake.delivery.events import ACK, HELD, REJECT, RETRY, Event, Outcome
from correlake.delivery.urls import masked
from correlake.errors import DeliveryError

EXCHANGE = "correlake.correlations"
QUEUE_ARGUMENTS = {"x-queue-type": "quorum", "x-single-active-consumer": True}
CONTENT_TYPE = "application/json"
PERSISTENT = 2  # AMQP delivery_mode
# The broker closes the channel on a message over its `max_message_size` (406), naming that size.
_OVER_MAX_SIZE = re.compile(r"larger than configured max size (\d+)")


def queue_name(partition: int) -> str:
    return f"{EXCHANGE}.p{partition}"


def routing_key(partition: int) -> str:
    return f"p{partition}"


class RabbitMQSink:
    """The `rabbitmq` sink (contract, *Delivery*). Outcomes: confirmed → ACK; nacked, returned
    unroutable, connection lost, broker unreachable or silent → RETRY; a body over the broker's
    max message size → REJECT."""

    def __init__(self, amqp_url: str, *, timeout: float = 30.0, window: int = 2000):
        try:
            self._params = pika.URLParameters(amqp_url)
        except Exception as error:  # pika raises ValueError and others on a malformed URL
            raise DeliveryError(f"bad AMQP URL {masked(amqp_url)}: {error}") from None
        self._password = self._params.credentials.password
        self._where = masked(amqp_url)
        self.timeout, self.window = timeout, window
        self._partitions: int | None = None
        self._link: Link | None = None
        self._max_size: int | None = None  # learned from the broker's refusal of a message

    def _redact(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    # -- the topology ---------------------------------------------------------------------
    def prepare(self, partitions: int) -> None:
        """Declare the exchange, the partitions' queues and their bindings (idempotent). A
        broker that cannot be reached is not an error here: sends then come back RETRY."""
        self._partitions = partitions
        try:
            self._connected()
        except Gone as gone:
            if self._link is not None and self._link.closed_by_broker:
                raise DeliveryError(f"RabbitMQ at {self._where} refused a declaration: {gone}") from None
            if self._link is not None and self._link.refused:
                raise DeliveryError(f"RabbitMQ at {self._where}: {self._link.refused}") from None

    def _declare(self, link: Link, partitions: int) -> None:
        channel = link.channel
        link.call(lambda done: channel.exchange_declare(EXCHANGE, "direct", durable=True, callback=done))
        for i in range(partitions):
            link.call(lambda done, i=i: channel.queue_declare(queue_name(i), durable=True,
                                                              arguments=QUEUE_ARGUMENTS, callback=done))
            link.call(lambda done, i=i: channel.queue_bind(queue_name(i), EXCHANGE, routing_key(i), callback=done))

    def _connected(self) -> Link:
        """The open link, connecting (and declaring the topology) when there is none."""
        if self._link is not None and self._link.gone is None:
            self._link.pump()  # a link the broker closed since: noticed here, not by the events sent next
        if self._link is not None and self._link.gone is None:
            return self._link
        self._drop()
        self._link = Link(self._params, self.timeout, self._redact)
        self._link.open()
        if self._partitions:
            self._declare(self._link, self._partitions)
        return self._link

    def _drop(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def drained(self, old_partitions: int) -> bool:
        """True when no queue of partitions 0…old_partitions-1 holds a ready message (a queue
        that does not exist holds none). Messages a consumer holds unacknowledged are not
        counted: AMQP's passive declare does not report them."""
        for i in range(old_partitions):
            link = self._connected_or_raise()
            try:
                ok = link.call(lambda done, i=i: link.channel.queue_declare(queue_name(i), passive=True, callback=done))
            except Gone:
                if link.closed_by_broker and link.closed_by_broker[0] == 404:
                    continue  # no such queue: nothing in it (the channel is gone; reconnect)
                raise DeliveryError(f"RabbitMQ at {self._where}: {link.gone}") from None
            if ok.method.message_count:
                return False
        return True

    def _connected_or_raise(self) -> Link:
        try:
            return self._connected()
        except Gone as gone:
            raise DeliveryError(f"RabbitMQ at {self._where}: {gone}") from None

    # -- sending --------------------------------------------------------------------------
    def send(self, events: list[Event], until: float | None = None) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        todo = list(range(len(events)))
        while todo:
            for i in [i for i in todo if self._too_large(events[i])]:
                outcomes[i] = Outcome(events[i].event_id, REJECT, f"payload of {len(events[i].body)} bytes is larger "
                                                                   f"than the broker's max message size {self._max_size}")
            todo = [i for i in todo if i not in outcomes]
            if not todo:
                break
            try:
                link = self._connected()
            except Gone as gone:
                outcomes.update((i, Outcome(events[i].event_id, RETRY, str(gone))) for i in todo)
                break
            max_before = self._max_size
            outcomes.update(self._publish(link, [(i, events[i]) for i in todo], until))
            learned = self._learn_max_size(link)
            # a body over a newly learned limit closed the channel: reject it, send the rest again
            todo = [i for i in todo if outcomes[i].verdict == RETRY] if learned != max_before else []
            for i in todo:
                del outcomes[i]
        return [outcomes[i] for i in range(len(events))]

    def _too_large(self, event: Event) -> bool:
        return self._max_size is not None and len(event.body) > self._max_size

    def _learn_max_size(self, link: Link) -> int | None:
        if link.closed_by_broker and link.closed_by_broker[0] == 406:
            found = _OVER_MAX_SIZE.search(link.closed_by_broker[1])
            if found:
                self._max_size = int(found.group(1))
        return self._max_size

    def _publish(self, link: Link, batch: list[tuple[int, Event]], until: float | None) -> dict[int, Outcome]:
        """Publish with at most `window` unconfirmed; every event of `batch` gets its Outcome.
        A key's events go in sequence order on one channel, so its queue takes them in that
        order; once the broker refuses one (nack, return), the key's later events not yet
        published are HELD. (A quorum queue with no length limit, as declared here, refuses
        only when it takes nothing: a later event of the key confirmed after a refused one
        is recorded as such in its attempt's detail.)"""
        outcomes: dict[int, Outcome] = {}
        stopped: set[tuple[str, str]] = set()  # the keys with a refused event
        in_flight: dict[int, tuple[int, Event]] = {}  # delivery tag -> (index, event)
        returned: dict[str, str] = {}  # message id -> why the broker returned it
        pending = iter(batch)
        progress = [time.monotonic()]

        def settle(tag: int, verdict: str, detail: str) -> None:
            index, event = in_flight.pop(tag)
            why = returned.pop(event.event_id, None)
            if why is not None and verdict == ACK:
                verdict, detail = RETRY, f"returned unroutable by the broker: {why}"
            if verdict != ACK:
                stopped.add(event.line)
            elif event.line in stopped:
                detail = "confirmed after an earlier event of its ordering key was refused: out of order in its queue"
            outcomes[index] = Outcome(event.event_id, verdict, detail)

        def on_confirm(tag: int, multiple: bool, ok: bool) -> None:
            verdict, detail = (ACK, "confirmed") if ok else (RETRY, "nacked by the broker")
            if not multiple:
                if tag in in_flight:
                    settle(tag, verdict, detail)
            while multiple and in_flight and (first := next(iter(in_flight))) <= tag:  # tags in publish order
                settle(first, verdict, detail)
            progress[0] = time.monotonic()
            fill()

        def fill() -> None:
            while len(in_flight) < self.window and link.gone is None:
                item = next(pending, None)
                if item is None:
                    return
                index, event = item
                if event.line in stopped or (until is not None and time.monotonic() > until):
                    why = "an earlier event of its key was refused" if event.line in stopped else "the batch's time was up"
                    outcomes[index] = Outcome(event.event_id, HELD, why)
                    continue
                link.channel.basic_publish(EXCHANGE, routing_key(event.partition), event.body,
                                           properties=_properties(event), mandatory=True)
                link.published += 1
                in_flight[link.published] = item

        link.on_confirm = on_confirm
        link.on_return = lambda message_id, why: returned.__setitem__(message_id, why)
        try:
            fill()
            link.run(lambda: not in_flight and len(outcomes) == len(batch),
                     idle=lambda: time.monotonic() - progress[0])
        except (Gone, AMQPError) as error:  # AMQPError: basic_publish on a link that just failed
            link.gone = link.gone or self._redact(f"{type(error).__name__}: {error}")
            for tag in list(in_flight):
                settle(tag, RETRY, f"not confirmed: {link.gone}")
            outcomes.update((index, Outcome(event.event_id, RETRY, f"not sent: {link.gone}")) for index, event in pending)
        finally:
            link.on_confirm, link.on_return = (lambda tag, multiple, ok: None), (lambda message_id, why: None)
        return outcomes

    def close(self) -> None:
        self._drop()


def _properties(event: Event) -> pika.BasicProperties:
    return pika.BasicProperties(
        message_id=event.event_id, content_type=CONTENT_TYPE, delivery_mode=PERSISTENT,
        headers={"tenant_id": event.tenant_id, "correlation_key": event.correlation_key,
                 "ordering_key": event.ordering_key, "sequence": event.sequence, "kind": event.kind})
