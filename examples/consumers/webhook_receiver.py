"""An idempotent receiver of correlake's webhook (http.server).

    CORRELAKE_WEBHOOK_SECRET=... python examples/consumers/webhook_receiver.py LEDGER.sqlite [--port P]
                                                                                [--secret-env NAME]

Each POST carries one event. With a secret (read from the environment variable, never
printed) the `X-Correlake-Signature: sha256=<hex HMAC-SHA256 of the body>` header must match,
else 401. The event is applied and its id recorded in the SQLite ledger in one transaction;
only then does the receiver answer 200 (`applied` or, for an id already recorded,
`duplicate`). A body that is not an event is answered 400; a failure while applying, 500
(correlake retries both 5xx and a lost answer, and the ledger keeps the retry from applying twice).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from ledger import open_ledger, parse_event, process_once

SIGNATURE_HEADER = "X-Correlake-Signature"
DEFAULT_SECRET_ENV = "CORRELAKE_WEBHOOK_SECRET"


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def make_server(ledger: str | Path, *, host: str = "127.0.0.1", port: int = 0, secret: bytes | None = None) -> HTTPServer:
    """A receiver bound to host:port (0: any free port, see `server.server_port`); one request
    at a time, so its effects are applied in the order received. Run it with `serve_forever()`."""
    conn = open_ledger(ledger)

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if secret is not None and not hmac.compare_digest(self.headers.get(SIGNATURE_HEADER, ""),
                                                              signature(secret, body)):
                return self._answer(401, {"error": "bad or missing signature"})
            try:
                event = parse_event(body)
            except ValueError as error:
                return self._answer(400, {"error": str(error)})
            try:
                applied = process_once(conn, event, body)
            except Exception as error:  # noqa: BLE001 - not committed: the sender retries
                return self._answer(500, {"error": type(error).__name__})
            self._answer(200, {"event_id": event["event_id"], "status": "applied" if applied else "duplicate"})

        def _answer(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args) -> None:  # quiet: one line per event is noise
            pass

    return HTTPServer((host, port), Receiver)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ledger", help="the SQLite file of processed event ids and effects")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8808)
    parser.add_argument("--secret-env", default=DEFAULT_SECRET_ENV,
                        help=f"the environment variable holding the signing secret (default {DEFAULT_SECRET_ENV})")
    args = parser.parse_args(argv)
    secret = os.environ.get(args.secret_env)
    server = make_server(args.ledger, host=args.host, port=args.port, secret=secret.encode() if secret else None)
    print(f"webhook receiver on http://{args.host}:{server.server_port}/ "
          f"({'signatures checked' if secret else 'no secret: signatures not checked'})", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
