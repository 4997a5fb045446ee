"""The sinks by name: what `correlake deliver --sink` and the Airflow delivery DAG open."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urlsplit

from correlake import config
from correlake.delivery.events import Sink
from correlake.errors import DeliveryError

SINKS = ("webhook", "rabbitmq")


def masked(url: str) -> str:
    """The URL with its password (if any) as `***`: what may be printed or logged."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{user.partition(':')[0]}:***@{host}").geturl()


def with_password(url: str, password: str | None) -> str:
    """`url` with `password` (config.SINK_PASSWORD_ENV's) as its user's; DeliveryError for
    a URL without a user or with a password of its own."""
    if password is None:
        return url
    parts = urlsplit(url)
    if parts.username is None or parts.password is not None:
        raise DeliveryError(f"{config.SINK_PASSWORD_ENV} is set: the sink's URL {masked(url)!r} names its user and "
                            "no password (scheme://USER@HOST/…)")
    user, _, host = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}").geturl()


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
