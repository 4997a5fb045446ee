"""Where a run replays each touched key group from (`semantics/quiet.py`), for both backends:
each group's last cluster before the run, from its records in silver and its rows of gold's
subscriptions and started instances, then where its new records let it replay from; and the
records cut there. Inputs are Arrow tables (the driver backend's own; the Spark backend's fetched)."""

from __future__ import annotations

import pyarrow as pa

from correlake.lake import deltars
from correlake.semantics.order import MESSAGE_PUBLISHED
from correlake.semantics.quiet import last_cluster, replay_from

MESSAGE_COLUMNS = ["position", "tenant_id", "correlation_key", "published_at", "ttl_ms"]
EVENT_COLUMNS = ["position", "tenant_id", "type", "timestamp", "element_instance_key", "process_instance_key", "label"]
# gold's rows of the touched keys whose spans `quiet.spans` reads
GOLD_COLUMNS = {"subscriptions": ["tenant_id", "correlation_key", "element_instance_key", "process_instance_key",
                                  "opened_at", "closed_at"],
                "message_started_instances": ["tenant_id", "correlation_key", "process_instance_key", "started_at",
                                              "ended_at"]}


def points(gold: dict[str, pa.Table | None] | None, scope: list[tuple[str, str, str]], messages: pa.Table,
           events: pa.Table, new: set[tuple[str, int]]) -> dict[tuple[str, str], int]:
    """Each touched key group's replay point by (tenant_id, label) (`quiet.replay_from`; no
    entry: from its first record). `gold`: gold's rows (GOLD_COLUMNS) of the `scope`'s keys (tenant_id,
    correlation_key, label) before the run (None: no group replays from a quiet point);
    `messages` (MESSAGE_COLUMNS) and `events` (EVENT_COLUMNS): the touched key groups'
    records; `new`: ("m" or "e", position) of the new ones. A message of the history counts
    as accepted: a rejected duplicate's life is its instant, so its window can only join
    clusters, and a quiet point of joined clusters is one of the exact ones."""
    if gold is None:
        return {}
    label = _label_of(scope)
    records = [{"kind": MESSAGE_PUBLISHED, "t": t, "position": p, "tenant_id": tenant, "label": label[(tenant, key)],
                "accepted": True, "ttl_ms": ttl, "new": ("m", p) in new}
               for p, tenant, key, t, ttl in deltars.tuples(deltars.as_millis(messages.select(MESSAGE_COLUMNS)))]
    records += [{"kind": kind, "t": t, "position": p, "tenant_id": tenant, "label": lb,
                 "element_instance_key": element, "process_instance_key": instance, "new": ("e", p) in new}
                for p, tenant, kind, t, element, instance, lb in deltars.tuples(deltars.as_millis(
                    events.select(EVENT_COLUMNS)))]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["tenant_id"], r["label"]), []).append(r)
    rows = {name: _by_group(gold.get(name), label) for name in GOLD_COLUMNS}
    cut = {group: replay_from(last_cluster([r for r in found if not r["new"]], rows["subscriptions"].get(group, ()),
                                           rows["message_started_instances"].get(group, ())), found)
           for group, found in groups.items()}
    return {group: point for group, point in cut.items() if point is not None}


def _by_group(rows: pa.Table | None, label: dict[tuple[str, str], str]) -> dict[tuple[str, str], list[dict]]:
    """Gold's `rows` (times in millis) by key group (tenant_id, label)."""
    found: dict[tuple[str, str], list[dict]] = {}
    for row in [] if rows is None else deltars.as_millis(rows).to_pylist():
        found.setdefault((row["tenant_id"], label[(row["tenant_id"], row["correlation_key"])]), []).append(row)
    return found


def touched(scope: list[tuple[str, str, str]], since: dict[tuple[str, str], int]
            ) -> list[tuple[str, str, str, int | None]]:
    """The rows (TOUCHED) of the `scope`'s keys (tenant_id, correlation_key, label) with their
    key group's replay point."""
    return [(t, k, label, since.get((t, label))) for t, k, label in scope]


def replayed(messages: pa.Table, events: pa.Table, scope: list[tuple[str, str, str]],
             since: dict[tuple[str, str], int]) -> tuple[pa.Table, pa.Table]:
    """The `messages` and `events` (with `label`) at or after their key group's replay point."""
    def kept(rows: pa.Table, labels: list[str], column: str) -> pa.Table:
        at = deltars.millis(rows[column]).to_pylist()
        return rows.filter(pa.array([(s := since.get((tenant, label))) is None or t >= s for tenant, label, t in
                                     zip(rows["tenant_id"].to_pylist(), labels, at, strict=True)], pa.bool_()))

    if not since:
        return messages, events
    return kept(messages, _labels(messages, scope), "published_at"), kept(events, events["label"].to_pylist(),
                                                                          "timestamp")


def _label_of(scope: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """Each (tenant_id, correlation_key) of the `scope` with its key group's label."""
    return {(t, k): lb for t, k, lb in scope}


def _labels(messages: pa.Table, scope: list[tuple[str, str, str]]) -> list[str]:
    label = _label_of(scope)
    return [label[key] for key in deltars.tuples(messages.select(["tenant_id", "correlation_key"]))]
