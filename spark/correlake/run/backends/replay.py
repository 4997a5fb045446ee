"""Where a run replays each touched key group from (`semantics/quiet.py`), for both backends:
from the key groups' stored last clusters (silver/quiet_points, by key) and the key columns
of their records, history's and new, as Arrow tables (the driver backend's own; the Spark
backend's fetched), and the records cut there."""

from __future__ import annotations

import pyarrow as pa

from correlake.lake import deltars
from correlake.semantics.order import MESSAGE_PUBLISHED
from correlake.semantics.quiet import replay_points, stored_clusters

STORED = ["tenant_id", "correlation_key", "since", "until"]  # silver/quiet_points' columns read
MESSAGE_COLUMNS = ["position", "tenant_id", "correlation_key", "published_at"]
EVENT_COLUMNS = ["position", "tenant_id", "type", "timestamp", "element_instance_key", "process_instance_key", "label"]


def points(stored: pa.Table | None, scope: list[tuple[str, str, str]], messages: pa.Table, events: pa.Table,
           new: set[tuple[str, int]]) -> dict[tuple[str, str], int | None]:
    """Each touched key group's replay point by (tenant_id, label) (`quiet.replay_points`; none
    stored: no entry). `stored`: silver/quiet_points' rows (STORED) of the `scope`'s keys
    (tenant_id, correlation_key, label); `messages` (MESSAGE_COLUMNS) and `events`
    (EVENT_COLUMNS): the touched key groups' records; `new`: ("m" or "e", position) of the new ones."""
    if stored is None or not stored.num_rows:
        return {}
    rows = {(t, k): (since, until) for t, k, since, until in deltars.tuples(as_millis(stored.select(STORED)))}
    records = [{"kind": MESSAGE_PUBLISHED, "t": t, "position": p, "tenant_id": tenant, "label": label,
                "new": ("m", p) in new}
               for (p, tenant, _, t), label in zip(deltars.tuples(as_millis(messages.select(MESSAGE_COLUMNS))),
                                                   _labels(messages, scope), strict=True)]
    records += [{"kind": kind, "t": t, "position": p, "tenant_id": tenant, "label": label,
                 "element_instance_key": element, "process_instance_key": instance, "new": ("e", p) in new}
                for p, tenant, kind, t, element, instance, label in deltars.tuples(as_millis(
                    events.select(EVENT_COLUMNS)))]
    return replay_points(records, stored_clusters(scope, rows))


def touched(scope: list[tuple[str, str, str]], since: dict[tuple[str, str], int | None]
            ) -> list[tuple[str, str, str, int | None]]:
    """The rows (TOUCHED) of the `scope`'s keys (tenant_id, correlation_key, label) with their
    key group's replay point."""
    return [(t, k, label, since.get((t, label))) for t, k, label in scope]


def replayed(messages: pa.Table, events: pa.Table, scope: list[tuple[str, str, str]],
             since: dict[tuple[str, str], int | None]) -> tuple[pa.Table, pa.Table]:
    """The `messages` and `events` (with `label`) at or after their key group's replay point."""
    def kept(rows: pa.Table, labels: list[str], column: str) -> pa.Table:
        at = deltars.millis(rows[column]).to_pylist()
        return rows.filter(pa.array([(s := since.get((tenant, label))) is None or t >= s for tenant, label, t in
                                     zip(rows["tenant_id"].to_pylist(), labels, at, strict=True)], pa.bool_()))

    if not since:
        return messages, events
    return kept(messages, _labels(messages, scope), "published_at"), kept(events, events["label"].to_pylist(),
                                                                          "timestamp")


def _labels(messages: pa.Table, scope: list[tuple[str, str, str]]) -> list[str]:
    label = {(t, k): lb for t, k, lb in scope}
    return [label[key] for key in deltars.tuples(messages.select(["tenant_id", "correlation_key"]))]


def as_millis(rows: pa.Table) -> pa.Table:
    """`rows` with their times as epoch millis."""
    return pa.table([deltars.millis(c) if pa.types.is_timestamp(c.type) else c for c in rows.columns],
                    names=rows.column_names)
