"""A sink's URL: shown with its password masked, given its user's password from the
environment (docs/delivery.md#credentials)."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from correlake import config
from correlake.errors import DeliveryError


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
