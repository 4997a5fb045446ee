"""examples/consumers/webhook_receiver.py: an event is applied once however often it comes,
answered 200 after its commit; a bad signature is refused, a body that is no event is a 400."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import urllib.error
import urllib.request

import pytest

from correlake.config import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "examples" / "consumers"))
from webhook_receiver import SIGNATURE_HEADER, make_server, signature  # noqa: E402

SECRET = b"receiver-test-secret"


@pytest.fixture
def receiver(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    server = make_server(ledger, secret=SECRET)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/", ledger
    server.shutdown()
    server.server_close()


def post(url: str, body: bytes, sign: bytes | None = SECRET) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if sign is not None:
        headers[SIGNATURE_HEADER] = signature(sign, body)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_applied_once_and_signatures_checked(receiver):
    url, ledger = receiver
    body = json.dumps({"event_id": "e1", "kind": "CORRELATED", "tenant_id": "t", "correlation_key": "k",
                       "sequence": 1}).encode()
    assert post(url, body) == (200, {"event_id": "e1", "status": "applied"})
    assert post(url, body) == (200, {"event_id": "e1", "status": "duplicate"})
    assert post(url, body, sign=b"another secret")[0] == 401
    assert post(url, body, sign=None)[0] == 401
    assert post(url, b"not json")[0] == 400
    assert post(url, b'{"no": "event_id"}')[0] == 400
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("SELECT event_id, correlation_key, sequence FROM effects").fetchall() == [("e1", "k", 1)]
