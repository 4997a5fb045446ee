"""The sinks by name: what `correlake deliver --sink` and the Airflow delivery DAG open."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from correlake import config
from correlake.delivery.events import Sink
from correlake.delivery.urls import with_password
from correlake.errors import DeliveryError

SINKS = ("webhook", "rabbitmq")


@contextmanager
def open_sink(kind: str, url: str | None, secret: str | None = None,
              timeout: float = config.WEBHOOK_TIMEOUT_SECONDS, password: str | None = None) -> Iterator[Sink]:
    """The sink `kind` at `url` (a webhook's http(s) URL, or a broker's amqp(s) URL), its
    user's `password` put in, closed when the block ends; `secret` signs webhook bodies.
    DeliveryError when it cannot be used."""
    if kind not in SINKS:
        raise DeliveryError(f"unknown sink {kind!r}: one of {', '.join(SINKS)}")
    if not url:
        raise DeliveryError(f"the {kind} sink needs its URL (--url for a webhook, --amqp-url for RabbitMQ)")
    url = with_password(url, password)
    if kind == "webhook":
        from correlake.delivery.webhook import WebhookSink

        sink = WebhookSink(url, secret or None, timeout)
    else:
        from correlake.delivery.rabbitmq import RabbitMQSink

        sink = RabbitMQSink(url)
    try:
        yield sink
    finally:
        sink.close()
