"""An idempotent receiver of correlake's webhook (http.server).

    CORRELAKE_WEBHOOK_SECRET=... python examples/consumers/webhook_receiver.py LEDGER.sqlite [--port P]
                                                                                [--secret-env NAME]

Each POST carries one event. With a secret (`whsec_…`, read from the environment variable,
never printed) a request must carry a valid Standard Webhooks signature (`webhook-id`,
`webhook-timestamp`, `webhook-signature`, checked by the `standardwebhooks` library) whose
timestamp is within 5 minutes of now, else 401; its `webhook-id` must be the event's id,
else 400; a signed request that came before (the same `webhook-id` and timestamp: a replay)
is refused with 425 Too Early, which correlake retries, signed anew. The event is applied
and its id recorded in the SQLite ledger in one transaction; only then does the receiver
answer 200 (`applied` or, for an id already recorded, `duplicate`). A body that is not an
event is answered 400; a failure while applying, 500 (correlake retries both 5xx and a lost
answer, and the ledger keeps the retry from applying twice).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from ledger import open_ledger, parse_event, process_once
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

DEFAULT_SECRET_ENV = "CORRELAKE_WEBHOOK_SECRET"
TOLERANCE_SECONDS = 300  # the Standard Webhooks library's own: an older or newer timestamp is refused


def make_server(ledger: str | Path, *, host: str = "127.0.0.1", port: int = 0, secret: str | None = None) -> HTTPServer:
    """A receiver bound to host:port (0: any free port, see `server.server_port`); one request
    at a time, so its effects are applied in the order received. Run it with `serve_forever()`."""
    conn = open_ledger(ledger)
    verifier = Webhook(secret) if secret else None
    seen: dict[tuple[str, str], float] = {}  # (webhook-id, webhook-timestamp) of the signed requests: their time

    def replayed(webhook_id: str, timestamp: str) -> bool:
        """Whether this signed request came before; remembers it (the stale ones are forgotten:
        their timestamp refuses them)."""
        for mark in [mark for mark, at in seen.items() if at < time.time() - TOLERANCE_SECONDS]:
            del seen[mark]
        if (webhook_id, timestamp) in seen:
            return True
        seen[(webhook_id, timestamp)] = float(timestamp)
        return False

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if verifier is not None:
                try:
                    verifier.verify(body, dict(self.headers), json_parse=False)
                except WebhookVerificationError as error:
                    return self._answer(401, {"error": f"bad signature: {error}"})
            try:
                event = parse_event(body)
            except ValueError as error:
                return self._answer(400, {"error": str(error)})
            if verifier is not None:
                if self.headers["webhook-id"] != event["event_id"]:
                    return self._answer(400, {"error": "webhook-id is not the event's id"})
                if replayed(self.headers["webhook-id"], self.headers["webhook-timestamp"]):
                    return self._answer(425, {"error": "replayed: this signed request came before"})
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
    server = make_server(args.ledger, host=args.host, port=args.port, secret=secret or None)
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
