"""The consumers' idempotency ledger (SQLite): an event's id and its effect are committed in
one transaction, so an event delivered again (a redelivery, a resend after a lost confirm) is
recognised by its id and never applied twice. The consumer acknowledges only after that commit.

The effect here is a stand-in for what a real service does (continue the instance): a row of
`effects`, in the order applied, so that tests can check exactly-once and per-key order."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS processed (event_id TEXT PRIMARY KEY, processed_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS effects (
  applied INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, kind TEXT, tenant_id TEXT,
  correlation_key TEXT, ordering_key TEXT, sequence INTEGER, process_instance_key TEXT, body TEXT NOT NULL);
"""


def open_ledger(path: str | Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """The ledger at `path` (created when missing); several processes may share it. Commits
    survive a power loss (`synchronous` FULL); NORMAL ones survive a killed process only, and
    cost a fraction of the time (no fsync per commit)."""
    # transactions made explicit below; a server may open it in one thread and serve from another
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.executescript(SCHEMA)
    return conn


def record_effect(conn: sqlite3.Connection, event: dict, body: bytes) -> None:
    """The default effect: one row per applied event."""
    conn.execute("INSERT INTO effects (event_id, kind, tenant_id, correlation_key, ordering_key, sequence,"
                 " process_instance_key, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (event["event_id"], event.get("kind"), event.get("tenant_id"), event.get("correlation_key"),
                  event.get("ordering_key"), event.get("sequence"), event.get("process_instance_key"), body.decode()))


def parse_event(body: bytes) -> dict:
    """The event in a message body; ValueError when it is not one (not JSON, no `event_id`)."""
    event = json.loads(body)
    if not isinstance(event, dict) or not isinstance(event.get("event_id"), str):
        raise ValueError("not an event: a JSON object with a text event_id")
    return event


def process_once(conn: sqlite3.Connection, event: dict, body: bytes,
                 apply: Callable[[sqlite3.Connection, dict, bytes], None] = record_effect) -> bool:
    """Apply `event` unless its id is already recorded: whether it was applied now. Its id and
    its effect commit together, or neither does."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        fresh = conn.execute("INSERT OR IGNORE INTO processed VALUES (?, datetime('now'))",
                             (event["event_id"],)).rowcount == 1
        if fresh:
            apply(conn, event, body)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return fresh
