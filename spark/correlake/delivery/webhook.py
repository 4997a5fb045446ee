"""The webhook sink: each event POSTed to one URL (contract, *Webhook*), one lane per
partition, each lane with its own kept-alive connection, the lanes at once; a key's next
event only after the acknowledgement of the one before.

Any 2xx acknowledges; 408, 425, 429, 5xx, a timeout or a connection that fails is retried
later; any other status rejects the event (its group is cancelled). With a secret, each
attempt is signed as Standard Webhooks says (contract revision 4). Standard library only."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import http.client
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urlsplit

from correlake.config import WEBHOOK_TIMEOUT_SECONDS
from correlake.delivery.events import ACK, HELD, REJECT, RETRY, Event, Outcome
from correlake.delivery.urls import masked
from correlake.errors import DeliveryError

RECOVERABLE = frozenset({408, 425, 429})
DETAIL_CHARS = 200  # of a response's body, in delivery/attempts' `detail`
# A kept-alive connection the server closed meanwhile fails before any answer: sent again
# at once on a new connection rather than counted as a failed attempt.
STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


def signing_key(secret: str) -> bytes:
    """The key of a Standard Webhooks secret, `whsec_` and the base64 of 24 to 64 bytes;
    DeliveryError (never showing the secret) for anything else."""
    prefix, _, text = secret.strip().partition("_")
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)  # padded or not
    except (binascii.Error, ValueError):
        key = b""
    if prefix != "whsec" or not 24 <= len(key) <= 64:
        raise DeliveryError("the webhook's signing secret is not a Standard Webhooks secret (whsec_ and the base64 "
                            "of 24 to 64 random bytes; make one with: python3 -c \"import base64, secrets; "
                            "print('whsec_' + base64.b64encode(secrets.token_bytes(32)).decode())\")")
    return key


def signed_headers(key: bytes, event_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """An attempt's signature headers: Standard Webhooks' (the HMAC-SHA256 of
    `id.timestamp.body`) and, beside them until revision 5, X-Correlake-Signature (of the body)."""
    mac = hmac.new(key, f"{event_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": event_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(mac).decode(),
            "X-Correlake-Signature": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()}


class WebhookSink:
    def __init__(self, url: str, secret: str | None = None, timeout: float = WEBHOOK_TIMEOUT_SECONDS):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DeliveryError(f"webhook URL {masked(url)!r}: must be http:// or https:// with a host")
        try:
            self.port = parts.port
        except ValueError:
            raise DeliveryError(f"webhook URL {masked(url)!r}: bad port") from None
        self.https, self.host = parts.scheme == "https", parts.hostname
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.authorization = None
        if parts.username is not None:
            user_pass = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.authorization = "Basic " + base64.b64encode(user_pass).decode()
        self.key = signing_key(secret) if secret else None
        self.timeout = timeout
        self.connections: dict[int, http.client.HTTPConnection] = {}
        self.pool: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:  # never the secret nor the password
        return f"WebhookSink({'https' if self.https else 'http'}://{self.host}{self.target})"

    def drained(self, old_partitions: int) -> bool:
        """Always: a webhook holds nothing back, order is kept by sending a key's next event
        only after its last one's acknowledgement."""
        return True

    def prepare(self, partitions: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=partitions, thread_name_prefix="webhook")

    def send(self, events: list[Event], until: float | None = None) -> list[Outcome]:
        lanes: dict[int, list[Event]] = {}
        for event in events:
            lanes.setdefault(event.partition, []).append(event)
        done = {}
        for outcomes in self.pool.map(lambda lane: self._lane(lane, until), lanes.values()):
            done.update((o.event_id, o) for o in outcomes)
        return [done[event.event_id] for event in events]

    def _lane(self, events: list[Event], until: float | None) -> list[Outcome]:
        """One partition's events, one after the other (a key's are all in one lane): a key
        whose event was not acknowledged sends nothing more in this batch."""
        stopped, outcomes = set(), []
        for event in events:
            if event.line in stopped:
                outcomes.append(Outcome(event.event_id, HELD, "an earlier event of its ordering key was not acknowledged"))
            elif until is not None and time.monotonic() > until:
                outcomes.append(Outcome(event.event_id, HELD, "the batch's time was up"))
            else:
                outcomes.append(self._post(event))
                if outcomes[-1].verdict != ACK:
                    stopped.add(event.line)
        return outcomes

    def _post(self, event: Event) -> Outcome:
        headers = {"Content-Type": "application/json", "Idempotency-Key": event.event_id}
        if self.key:
            headers |= signed_headers(self.key, event.event_id, event.body, int(time.time()))
        if self.authorization:
            headers["Authorization"] = self.authorization
        for fresh in (False, True):
            connection, reused = self._connection(event.partition, fresh)
            try:
                connection.request("POST", self.target, body=event.body, headers=headers)
                response = connection.getresponse()
                text = response.read(64 * 1024).decode("utf-8", "replace")
                if response.will_close or not response.isclosed():
                    self._drop(event.partition)
                return Outcome(event.event_id, verdict(response.status),
                               f"HTTP {response.status} {response.reason} {text[:DETAIL_CHARS]}".strip())
            except STALE_CONNECTION as exc:
                self._drop(event.partition)
                if reused and not fresh:
                    continue
                return Outcome(event.event_id, RETRY, _failure(exc))
            except (OSError, http.client.HTTPException) as exc:
                self._drop(event.partition)
                what = f"no answer within {self.timeout:g} s" if isinstance(exc, TimeoutError) else _failure(exc)
                return Outcome(event.event_id, RETRY, what)
        raise AssertionError("unreachable")

    def _connection(self, lane: int, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        """The lane's connection, and whether it was used before (a new one if `fresh`)."""
        if fresh:
            self._drop(lane)
        if lane in self.connections:
            return self.connections[lane], True
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        self.connections[lane] = kind(self.host, self.port, timeout=self.timeout)
        return self.connections[lane], False

    def _drop(self, lane: int) -> None:
        connection = self.connections.pop(lane, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        if self.pool:
            self.pool.shutdown()
        for lane in list(self.connections):
            self._drop(lane)


def verdict(status: int) -> str:
    if 200 <= status < 300:
        return ACK
    return RETRY if status in RECOVERABLE or 500 <= status < 600 else REJECT


def _failure(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"host not found ({exc.strerror})"
    return f"{type(exc).__name__}: {exc}".rstrip(": ")
