"""The webhook's Standard Webhooks signature (contract revision 4, *Webhook*), checked by the
`standardwebhooks` library and by hand, and examples/consumers/webhook_receiver.py: an event
is applied once however often it comes, answered 200 after its commit; a bad, stale or
replayed request is refused, a body that is no event is a 400."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sqlite3
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks.webhooks import Webhook
from support.delivery_helpers import Receiver

from correlake.config import PROJECT_ROOT
from correlake.delivery.events import ACK, RETRY, Event
from correlake.delivery.sinks import open_sink
from correlake.delivery.webhook import signing_key, verdict
from correlake.errors import DeliveryError

sys.path.insert(0, str(PROJECT_ROOT / "examples" / "consumers"))
from webhook_receiver import make_server  # noqa: E402

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()  # the scheme's form of a secret


@pytest.fixture
def receiver(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    server = make_server(ledger, secret=SECRET)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/", ledger
    server.shutdown()
    server.server_close()


def signed(body: bytes, event_id: str = "e1", secret: str = SECRET, age: float = 0.0) -> dict:
    """Standard Webhooks headers made by the library (not by correlake), `age` seconds old."""
    at = datetime.now(timezone.utc) - timedelta(seconds=age)
    return {"webhook-id": event_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": Webhook(secret).sign(event_id, at, body.decode())}


def post(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def body_of(event_id: str) -> bytes:
    return json.dumps({"event_id": event_id, "kind": "CORRELATED", "tenant_id": "t", "correlation_key": "k",
                       "ordering_key": "k", "sequence": 1}).encode()


def test_applied_once_and_bad_stale_or_replayed_requests_refused(receiver):
    url, ledger = receiver
    body = body_of("e1")
    first = signed(body, age=30)
    assert post(url, body, first) == (200, {"event_id": "e1", "status": "applied"})
    replay = post(url, body, first)[0]  # the same signed request again
    assert replay == 425 and verdict(replay) == RETRY  # correlake's own retry would be signed anew
    retry = signed(body)  # a later timestamp: a retry, not a replay
    assert post(url, body, retry) == (200, {"event_id": "e1", "status": "duplicate"})
    other = body_of("e2")
    assert post(url, other, signed(other, "e2", age=6 * 60))[0] == 401  # stale: older than 5 minutes
    assert post(url, other, signed(other, "e2", age=-6 * 60))[0] == 401  # from the future
    assert post(url, other, signed(other, "e2", secret="whsec_" + base64.b64encode(b"x" * 32).decode()))[0] == 401
    assert post(url, other, signed(body, "e2"))[0] == 401  # the signature of another body
    assert post(url, other, {})[0] == 401
    assert post(url, other, signed(other, "e1"))[0] == 400  # webhook-id is not the event's id
    assert post(url, b"not json", signed(b"not json"))[0] == 400
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("SELECT event_id, correlation_key, sequence FROM effects").fetchall() == [("e1", "k", 1)]


def test_the_sinks_signature_verifies_with_the_library_and_by_hand(receiver):
    url, ledger = receiver
    body = body_of("e7")
    event = Event("e7", "CORRELATED", "t", "k", "k", 7, 1, 0, body)
    recorder = Receiver()  # keeps each request's headers
    before = int(time.time())
    try:
        for target in (recorder.url, url):  # the example receiver checks it with the library
            with open_sink("webhook", target, SECRET) as sink:
                sink.prepare(1)
                assert [o.verdict for o in sink.send([event])] == [ACK]
    finally:
        recorder.close()
    [(headers, sent)] = recorder.headers
    assert sent == body and Webhook(SECRET).verify(body, headers) == json.loads(body)
    stamp = headers["webhook-timestamp"]
    assert before <= int(stamp) <= time.time() and headers["webhook-id"] == "e7"
    mac = hmac.new(KEY, b"e7." + stamp.encode() + b"." + body, hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(mac).decode()
    assert headers["X-Correlake-Signature"] == "sha256=" + hmac.new(KEY, body, hashlib.sha256).hexdigest()
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("SELECT event_id FROM effects").fetchall() == [("e7",)]


@pytest.mark.parametrize("secret", ["plain text", "whsec_" + base64.b64encode(b"short").decode(), "whsec_!!!",
                                    "wh_" + base64.b64encode(KEY).decode()])
def test_a_secret_not_in_the_schemes_form_is_refused_unshown(secret):
    with pytest.raises(DeliveryError, match="not a Standard Webhooks secret") as caught:
        signing_key(secret)
    assert secret not in str(caught.value)
