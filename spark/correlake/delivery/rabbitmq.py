"""The RabbitMQ sink (AMQP 0-9-1 with pika): the contract's exchange and per-partition quorum
queues, persistent messages, and publisher confirms pipelined over one channel.

pika's SelectConnection runs in the caller's thread: each call drives its I/O loop until
what it waits for has happened (a declaration answered, every published event confirmed)
or the connection is gone. Up to `window` events are in flight unconfirmed at a time, so a
send of many events neither waits for each confirm nor holds them all in pika's buffers."""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Callable

import pika
from pika.exceptions import AMQPError, ProbableAccessDeniedError, ProbableAuthenticationError

from correlake.delivery.events import ACK, REJECT, RETRY, Event, Outcome
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


def safe_url(amqp_url: str) -> str:
    """The URL without its password (what error messages may show)."""
    parts = urllib.parse.urlsplit(amqp_url)
    if parts.password is None:
        return amqp_url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urllib.parse.urlunsplit(parts._replace(netloc=user + netloc))


class _Gone(Exception):
    """The connection or channel closed (or never opened) while waiting on it."""


class _Link:
    """One connection and one confirm-mode channel, driven in the caller's thread."""

    def __init__(self, params: pika.URLParameters, timeout: float, redact: Callable[[str], str]):
        self.timeout, self.redact = timeout, redact
        self.gone: str | None = None  # why the connection or channel is unusable
        self.closed_by_broker: tuple[int, str] | None = None  # a channel error: (reply code, text)
        self.refused: str | None = None  # the login refused: no retry helps
        self.channel = None
        self.confirming = False
        self.published = 0  # the channel's last delivery tag (confirm mode numbers publishes 1, 2, 3…)
        self._until: Callable[[], bool] | None = None
        self.on_confirm: Callable[[int, bool, bool], None] = lambda tag, multiple, ok: None
        self.on_return: Callable[[str, str], None] = lambda message_id, reason: None
        self.connection = pika.SelectConnection(
            params, on_open_callback=self._opened, on_open_error_callback=self._open_failed,
            on_close_callback=self._closed)

    def open(self) -> None:
        """Wait for the connection and its channel in confirm mode."""
        self.run(lambda: self.confirming and self.channel.is_open)

    # -- the loop ------------------------------------------------------------------------
    def run(self, until: Callable[[], bool], idle: Callable[[], float] | None = None) -> None:
        """Drive the I/O loop until `until()` holds; raise _Gone if the link fails first, or
        when nothing happened for `timeout` seconds (`idle()`: seconds since the last progress)."""
        loop = self.connection.ioloop
        self._until = until
        started = time.monotonic()
        idle = idle or (lambda: time.monotonic() - started)

        def watchdog():
            if idle() > self.timeout:
                self._fail(f"no answer from the broker within {self.timeout:g} s")
                loop.stop()
            else:
                timer[0] = loop.call_later(min(1.0, self.timeout), watchdog)

        timer = [loop.call_later(min(1.0, self.timeout), watchdog)]
        try:
            while not (until() or self.gone):
                loop.start()
        finally:
            loop.remove_timeout(timer[0])
            self._until = None
        if self.gone and not until():
            raise _Gone(self.gone)

    def _wake(self) -> None:
        if self._until is not None and (self.gone or self._until()):
            self.connection.ioloop.stop()

    def _fail(self, why: str) -> None:
        self.gone = self.gone or self.redact(why)
        self._wake()

    # -- callbacks ------------------------------------------------------------------------
    def _opened(self, connection) -> None:
        connection.channel(on_open_callback=self._channel_opened)

    def _channel_opened(self, channel) -> None:
        self.channel = channel
        channel.add_on_close_callback(self._channel_closed)
        channel.add_on_return_callback(self._returned)
        channel.confirm_delivery(self._confirmed, callback=self._confirm_selected)

    def _confirm_selected(self, _frame) -> None:
        self.confirming = True
        self._wake()

    def _confirmed(self, frame) -> None:
        method = frame.method
        self.on_confirm(method.delivery_tag, method.multiple, isinstance(method, pika.spec.Basic.Ack))
        self._wake()

    def _returned(self, _channel, method, properties, _body) -> None:
        self.on_return(properties.message_id, f"{method.reply_code} {method.reply_text}")

    def _open_failed(self, _connection, error: BaseException) -> None:
        if isinstance(error, (ProbableAuthenticationError, ProbableAccessDeniedError)):
            self.refused = f"the broker refused the login: {error!r}"
        self._fail(f"broker unreachable: {type(error).__name__}: {error}")

    def _closed(self, _connection, reason: BaseException) -> None:
        self._fail(f"connection lost: {type(reason).__name__}: {reason}")

    def _channel_closed(self, _channel, reason: BaseException) -> None:
        code, text = getattr(reason, "reply_code", 0), getattr(reason, "reply_text", str(reason))
        if code > 0:  # a channel error; otherwise the connection's close, which `_closed` reports
            self.closed_by_broker = (code, text)
            self._fail(f"channel closed by the broker: {code} {text}")

    # -- synchronous operations -----------------------------------------------------------
    def call(self, start: Callable[[Callable], None]) -> object:
        """Start one asynchronous AMQP method (`start(callback)`) and wait for its answer."""
        answer: list = []

        def done(frame):
            answer.append(frame)
            self._wake()

        start(done)
        self.run(lambda: bool(answer))
        return answer[0]

    def pump(self) -> None:
        """Handle what arrived while nobody drove the loop (a close by the broker, a heartbeat)."""
        loop = self.connection.ioloop
        loop.call_later(0, loop.stop)
        loop.start()

    def close(self) -> None:
        if not (self.connection.is_closed or self.connection.is_closing):
            self.gone = None  # our own closing: wait for it
            try:
                self.connection.close()
                self.run(lambda: self.connection.is_closed)
            except (_Gone, AMQPError):
                pass
        self.connection.ioloop.close()


class RabbitMQSink:
    """The `rabbitmq` sink (contract, *Delivery*). Outcomes: confirmed → ACK; nacked, returned
    unroutable, connection lost, broker unreachable or silent → RETRY; a body over the broker's
    max message size → REJECT."""

    def __init__(self, amqp_url: str, *, timeout: float = 30.0, window: int = 2000):
        try:
            self._params = pika.URLParameters(amqp_url)
        except Exception as error:  # pika raises ValueError and others on a malformed URL
            raise DeliveryError(f"bad AMQP URL {safe_url(amqp_url)}: {error}") from None
        self._password = self._params.credentials.password
        self._where = safe_url(amqp_url)
        self.timeout, self.window = timeout, window
        self._partitions: int | None = None
        self._link: _Link | None = None
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
        except _Gone as gone:
            if self._link is not None and self._link.closed_by_broker:
                raise DeliveryError(f"RabbitMQ at {self._where} refused a declaration: {gone}") from None
            if self._link is not None and self._link.refused:
                raise DeliveryError(f"RabbitMQ at {self._where}: {self._link.refused}") from None

    def _declare(self, link: _Link, partitions: int) -> None:
        channel = link.channel
        link.call(lambda done: channel.exchange_declare(EXCHANGE, "direct", durable=True, callback=done))
        for i in range(partitions):
            link.call(lambda done, i=i: channel.queue_declare(queue_name(i), durable=True,
                                                              arguments=QUEUE_ARGUMENTS, callback=done))
            link.call(lambda done, i=i: channel.queue_bind(queue_name(i), EXCHANGE, routing_key(i), callback=done))

    def _connected(self) -> _Link:
        """The open link, connecting (and declaring the topology) when there is none."""
        if self._link is not None and self._link.gone is None:
            self._link.pump()  # a link the broker closed since: noticed here, not by the events sent next
        if self._link is not None and self._link.gone is None:
            return self._link
        self._drop()
        self._link = _Link(self._params, self.timeout, self._redact)
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
            except _Gone:
                if link.closed_by_broker and link.closed_by_broker[0] == 404:
                    continue  # no such queue: nothing in it (the channel is gone; reconnect)
                raise DeliveryError(f"RabbitMQ at {self._where}: {link.gone}") from None
            if ok.method.message_count:
                return False
        return True

    def _connected_or_raise(self) -> _Link:
        try:
            return self._connected()
        except _Gone as gone:
            raise DeliveryError(f"RabbitMQ at {self._where}: {gone}") from None

    # -- sending --------------------------------------------------------------------------
    def send(self, events: list[Event]) -> list[Outcome]:
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
            except _Gone as gone:
                outcomes.update((i, Outcome(events[i].event_id, RETRY, str(gone))) for i in todo)
                break
            max_before = self._max_size
            outcomes.update(self._publish(link, [(i, events[i]) for i in todo]))
            learned = self._learn_max_size(link)
            # a body over a newly learned limit closed the channel: reject it, send the rest again
            todo = [i for i in todo if outcomes[i].verdict == RETRY] if learned != max_before else []
            for i in todo:
                del outcomes[i]
        return [outcomes[i] for i in range(len(events))]

    def _too_large(self, event: Event) -> bool:
        return self._max_size is not None and len(event.body) > self._max_size

    def _learn_max_size(self, link: _Link) -> int | None:
        if link.closed_by_broker and link.closed_by_broker[0] == 406:
            found = _OVER_MAX_SIZE.search(link.closed_by_broker[1])
            if found:
                self._max_size = int(found.group(1))
        return self._max_size

    def _publish(self, link: _Link, batch: list[tuple[int, Event]]) -> dict[int, Outcome]:
        """Publish with at most `window` unconfirmed; every event of `batch` gets its Outcome."""
        outcomes: dict[int, Outcome] = {}
        in_flight: dict[int, tuple[int, Event]] = {}  # delivery tag -> (index, event)
        returned: dict[str, str] = {}  # message id -> why the broker returned it
        pending = iter(batch)
        progress = [time.monotonic()]

        def settle(tag: int, verdict: str, detail: str) -> None:
            index, event = in_flight.pop(tag)
            why = returned.pop(event.event_id, None)
            if why is not None and verdict == ACK:
                verdict, detail = RETRY, f"returned unroutable by the broker: {why}"
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
        except (_Gone, AMQPError) as error:  # AMQPError: basic_publish on a link that just failed
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
