"""A realistic sample landing: a few hours of an order -> payment -> shipping world.

- `order` starts on the message `order-placed` (key: order id); each instance
  waits in a receive task for `payment-received`, with an interrupting boundary
  event `order-cancelled` and a non-interrupting `payment-reminder`; then an
  event-based gateway waits for `shipment-dispatched` or `shipment-lost`.
- `billing` instances (started by the order system) also wait for
  `payment-received`: one payment correlates once to each process.
- Producers retry (same `message_id`), re-deliver files (exact replays), send
  numeric keys, and a few lines are broken.
- Every 25th order is placed again (same key, new id) a few minutes later: while
  the first instance is active the second waits behind the start-event lock.
"""

from __future__ import annotations

import gzip
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from correlake.contract.enums import (
    BOUNDARY_EVENT,
    ELEMENT_LEFT,
    EVENT_BASED_GATEWAY,
    INSTANCE_ENDED,
    INTERMEDIATE_CATCH_EVENT,
    PROCESS_DEPLOYED,
    RECEIVE_TASK,
    SUBSCRIPTION_OPENED,
)
from correlake.semantics.start_events import start_instance_key

BASE = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)
TENANTS = ["shop-eu", "shop-us"]


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class _World:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.position = 0
        self.messages: list[tuple[datetime, dict]] = []
        self.events: list[tuple[datetime, dict]] = []

    def pos(self) -> int:
        self.position += 1
        return self.position

    def publish(self, t: datetime, tenant: str, name: str, key, ttl_ms=3_600_000, message_id=None, **variables):
        record = {"position": self.pos(), "tenant_id": tenant, "name": name, "correlation_key": key,
                  "published_at": _iso(t), "ttl_ms": ttl_ms, "variables": variables}
        if message_id:
            record["message_id"] = message_id
        self.messages.append((t, record))
        return record

    def event(self, t: datetime, tenant: str, kind: str, **fields):
        record = {"position": self.pos(), "type": kind, "timestamp": _iso(t), "tenant_id": tenant, **fields}
        self.events.append((t, record))
        return record

    def open(self, t, tenant, process, instance, element, element_type, name, key, **extra):
        return self.event(t, tenant, SUBSCRIPTION_OPENED, bpmn_process_id=process, process_version=1,
                          process_instance_key=instance, element_instance_key=element, element_id=name,
                          element_type=element_type, message_name=name,
                          correlation_key=key, **extra)


def _order(world: _World, tenant: str, order_no: int, t: datetime) -> None:
    rng = world.rng
    key = f"order-{order_no}" if rng.random() < 0.8 else 100000 + order_no  # some numeric keys
    placed = world.publish(t, tenant, "order-placed", key, message_id=f"op-{order_no}",
                           amount=round(rng.uniform(5, 500), 2))
    if rng.random() < 0.05:  # producer retry: same id, rejected as a duplicate
        world.publish(t + timedelta(seconds=2), tenant, "order-placed", key, message_id=f"op-{order_no}")
    if order_no % 25 == 0:  # placed again: waits for the lock (no rng draw: the rest of the world is unchanged)
        world.publish(t + timedelta(minutes=3), tenant, "order-placed", key, message_id=f"op-{order_no}-again")
    instance = start_instance_key("order", placed["position"])
    opened = t + timedelta(milliseconds=rng.randint(200, 900))
    task = f"{instance}/pay"
    for name, element_type, interrupting in (("payment-received", RECEIVE_TASK, True),
                                             ("order-cancelled", BOUNDARY_EVENT, True),
                                             ("payment-reminder", BOUNDARY_EVENT, False)):
        world.open(opened, tenant, "order", instance, task, element_type, name, key, interrupting=interrupting)
    billing = f"bill-{order_no}"
    world.open(opened + timedelta(seconds=1), tenant, "billing", billing, f"{billing}/wait",
               INTERMEDIATE_CATCH_EVENT, "payment-received", key)

    fate = rng.random()
    paid_at = t + timedelta(minutes=rng.uniform(1, 50))
    if fate < 0.08:  # cancelled before paying
        world.publish(paid_at, tenant, "order-cancelled", key)
        world.event(paid_at + timedelta(seconds=1), tenant, INSTANCE_ENDED, process_instance_key=instance)
        return
    for _ in range(rng.choice([0, 0, 1, 2])):
        world.publish(t + timedelta(minutes=rng.uniform(0.5, 20)), tenant, "payment-reminder", key, ttl_ms=0)
    if fate < 0.15:  # never paid: the payment arrives after the TTL of nothing; instance waits
        return
    world.publish(paid_at, tenant, "payment-received", key, message_id=f"pay-{order_no}")
    world.event(paid_at + timedelta(seconds=1), tenant, ELEMENT_LEFT, element_instance_key=f"{billing}/wait")
    gateway = f"{instance}/ship"
    at_gateway = paid_at + timedelta(seconds=2)
    for name in ("shipment-dispatched", "shipment-lost"):
        world.open(at_gateway, tenant, "order", instance, gateway, EVENT_BASED_GATEWAY, name, key)
    if fate < 0.9:
        shipped = at_gateway + timedelta(minutes=rng.uniform(5, 90))
        world.publish(shipped, tenant, "shipment-dispatched", key, carrier=rng.choice(["DHL", "UPS", "PostNL"]))
        world.event(shipped + timedelta(seconds=5), tenant, INSTANCE_ENDED, process_instance_key=instance)


def _write(path: Path, records: list[dict], gz: bool = False, extra_lines: list[str] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("".join(json.dumps(r) + "\n" for r in records) + "".join(line + "\n" for line in extra_lines)).encode()
    if gz:
        path, data = path.with_name(path.name + ".gz"), gzip.compress(data, mtime=0)
    if not (path.exists() and path.read_bytes() == data):  # unchanged files keep their mtime: no re-ingestion
        path.write_bytes(data)


def write_demo_landing(landing: Path, hours: int = 3, seed: int = 7, orders_per_hour: int = 120) -> dict:
    """Write the sample landing (hourly files per stream); return record counts."""
    world = _World(seed)
    for tenant in TENANTS:
        world.event(BASE - timedelta(days=1), tenant, PROCESS_DEPLOYED, bpmn_process_id="order",
                    process_version=1, message_start_events=["order-placed"])
        world.event(BASE - timedelta(days=1), tenant, PROCESS_DEPLOYED, bpmn_process_id="billing",
                    process_version=1, message_start_events=[])
    for order_no in range(1, hours * orders_per_hour + 1):
        t = BASE + timedelta(seconds=world.rng.uniform(0, hours * 3600))
        _order(world, world.rng.choice(TENANTS), order_no, t)

    bad = ['{"position": 999999001, "name": "payment-received", "correlation_key": "order-1"',  # truncated
           '{"position": 999999002, "correlation_key": "order-2", "published_at": "2026-11-02T09:00:00Z"}']
    for stream, items in (("messages", world.messages), ("workflow_events", world.events)):
        by_hour: dict[str, list[dict]] = {}
        for t, record in sorted(items, key=lambda x: (x[0], x[1]["position"])):
            hour = max(t, BASE).strftime("%Y/%m/%d/%H")
            by_hour.setdefault(hour, []).append(record)
        for i, (hour, records) in enumerate(sorted(by_hour.items())):
            _write(landing / stream / f"{hour}.jsonl", records, gz=(i % 2 == 1),
                   extra_lines=bad if stream == "messages" and i == 0 else ())
        if stream == "messages":  # a re-delivered file: exact replays (named in its hour's order)
            first_hour = sorted(by_hour)[0]
            _write(landing / stream / f"{first_hour}-redelivered.jsonl", by_hour[first_hour][:20])
    return {"messages": len(world.messages), "workflow_events": len(world.events), "bad": len(bad)}
