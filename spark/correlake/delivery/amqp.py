"""One AMQP 0-9-1 connection and its confirm-mode channel (pika's SelectConnection),
driven in the caller's thread: each call runs the I/O loop until what it waits for has
happened or the connection is gone. Used by the RabbitMQ sink (`rabbitmq.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pika
from pika.exceptions import AMQPError, ProbableAccessDeniedError, ProbableAuthenticationError


class Gone(Exception):
    """The connection or channel closed (or never opened) while waiting on it."""


class Link:
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
        """Drive the I/O loop until `until()` holds; raise Gone if the link fails first, or
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
            raise Gone(self.gone)

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
            except (Gone, AMQPError):
                pass
        self.connection.ioloop.close()
