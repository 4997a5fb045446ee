"""Delivery without Spark: an outbox written with delta-rs as a run would publish it, a real
HTTP receiver that deduplicates by event id (the webhook tests and the benchmark), and the
order checks of the delivery tests.

Delivery's order is per ordering key, `(tenant_id, ordering_key)` (revision 3 of the
contract): the checks take what was sent or applied as (tenant_id, ordering_key,
sequence) rows in the order it happened and look at each ordering key's rows apart."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
from deltalake import write_deltalake

from correlake.config import DELIVERY_PARTITIONS, table_path
from correlake.contract.ordering import ordering_key
from correlake.delivery.events import CORRELATED, partition_of
from correlake.delivery.tables import arrow_schema
from correlake.lake import journal

TENANT = "<default>"


def event(tenant: str, key: str, sequence: int, message_key: int, variables: dict | None = None) -> dict:
    """An outbox row; its payload starts with the event's fields, as a run writes it."""
    line = ordering_key(key, message_key)
    event_id = hashlib.sha256(f"{tenant}\0{line}\0{sequence}".encode()).hexdigest()
    partition = partition_of(tenant, line, DELIVERY_PARTITIONS)
    payload = {"event_id": event_id, "kind": CORRELATED, "ordering_key": line, "sequence": sequence,
               "partition": partition, "tenant_id": tenant, "correlation_key": key, "message_key": message_key,
               "correlated_at": "2026-01-01T00:00:00.000Z", "variables": variables or {"n": sequence}}
    return {"event_id": event_id, "kind": CORRELATED, "tenant_id": tenant, "correlation_key": key,
            "ordering_key": line, "message_key": message_key, "bpmn_process_id": "p", "sequence": sequence,
            "partition": partition, "payload": json.dumps(payload, separators=(",", ":")), "_run_id": "r1"}


Row = tuple[str, str, int]  # (tenant_id, ordering_key, sequence)


def by_ordering_key(rows: Iterable[Row]) -> dict[tuple[str, str], list[int]]:
    """Each ordering key's sequences, in the order of `rows`."""
    keyed = defaultdict(list)
    for tenant, key, sequence in rows:
        keyed[(tenant, key)].append(sequence)
    return dict(keyed)


def out_of_order(rows: Iterable[Row]) -> dict[tuple[str, str], list[int]]:
    """The ordering keys whose sequences go down somewhere (one sent again is no disorder)."""
    return {key: seqs for key, seqs in by_ordering_key(rows).items() if seqs != sorted(seqs)}


def not_in_sequence(rows: Iterable[Row]) -> dict[tuple[str, str], list[int]]:
    """The ordering keys whose sequences are not 1, 2, 3… (in order, none missing, none twice)."""
    return {key: seqs for key, seqs in by_ordering_key(rows).items() if seqs != list(range(1, len(seqs) + 1))}


def by_key_alone(rows: Iterable[Row]) -> list[Row]:
    """`rows` with the tenants made one: what a check grouping by the key alone sees.
    A workload in which a check passes on `rows` and fails on these tells the tenants apart."""
    return [("*", key, sequence) for _, key, sequence in rows]


def write_outbox(lake: str, rows: list[dict], batch: int = 1_000_000) -> None:
    """Append `rows` to the lake's outbox (`batch` rows a file) and publish it."""
    for start in range(0, len(rows), batch):
        table = pa.Table.from_pylist(rows[start:start + batch], schema=arrow_schema("outbox"))
        write_deltalake(table_path(lake, "outbox"), table, mode="append")
    journal.mark_published(lake)


class Receiver:
    """A webhook on 127.0.0.1 (a free port) in a thread. Every request is kept in `requests`
    as (event_id, tenant, key, sequence, status), its time (monotonic) in `times`; an
    event's first 2xx is `applied` (an idempotent consumer). `script[event_id]`: the answers to its next requests, each a
    status or (status, seconds to wait first); then 200. `delay`: seconds before every answer."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, wait = receiver.answer(self.headers, body)
                time.sleep(wait)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self, delay: float = 0.0) -> None:
        with self.lock:
            self.requests, self.applied, self.headers, self.times = [], {}, [], []
            self.script: dict[str, list] = defaultdict(list)
            self.delay = delay

    def answer(self, headers, body: bytes) -> tuple[int, float]:
        event = json.loads(body)
        with self.lock:
            answers = self.script.get(event["event_id"])
            answer = answers.pop(0) if answers else 200
            status, wait = answer if isinstance(answer, tuple) else (answer, self.delay)
            self.requests.append((event["event_id"], event["tenant_id"], event["ordering_key"],
                                  event["sequence"], status))
            self.times.append(time.monotonic())
            self.headers.append((dict(headers), body))
            if 200 <= status < 300:
                self.applied.setdefault(event["event_id"], len(self.applied))
        return status, wait

    def rows(self) -> list[Row]:
        """The requests as (tenant, key, sequence), in the order they came."""
        return [(tenant, key, sequence) for _, tenant, key, sequence, _ in self.requests]

    def applied_rows(self) -> list[Row]:
        """The events as an idempotent consumer applied them (each once, at its first 2xx)."""
        first = {}
        for event_id, tenant, key, sequence, status in self.requests:
            if 200 <= status < 300:
                first.setdefault(event_id, (tenant, key, sequence))
        return list(first.values())

    def sequences(self) -> dict[tuple[str, str], list[int]]:
        """Each ordering key's sequences in the order their requests came."""
        return by_ordering_key(self.rows())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
