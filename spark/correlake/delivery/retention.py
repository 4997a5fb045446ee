"""What `correlake maintain` does to the delivery tables (docs/delivery.md, *Retention*):
`delivery/attempts` loses the attempts of events final for longer than the retention, and
both tables are compacted, checkpointed and vacuumed. `delivery/state` keeps one row per
event: it is what tells a pass an event was sent, so none is sent twice."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from correlake.delivery import tables
from correlake.delivery.deliver import DELIVERY_LOCK
from correlake.delivery.events import FINAL
from correlake.lake.lock import LakeBusy, held


def prune(lake: str, retain_days: float, dry_run: bool = False) -> int | None:
    """Remove (dry run: count) the attempts of the events final since before `retain_days`
    ago, then compact both tables; None if a delivery pass holds the lock (nothing done)."""
    before = datetime.now(timezone.utc) - timedelta(days=retain_days)
    try:
        with held(lake, DELIVERY_LOCK):
            pruned = tables.prune_attempts(lake, FINAL, before, dry_run)
            if not dry_run:
                tables.compact(lake, every=True)
            return pruned
    except LakeBusy:
        return None
