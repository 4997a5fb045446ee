"""Human-readable output of a run: the summary and what gold holds."""

from __future__ import annotations

from datetime import datetime, timezone

from correlake.config import table_path
from correlake.lake.landing import warning


def _iso(millis) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


MIGRATED = ("correlake: migrated the lake to contract revision 2 first: its as_of moved from every "
            "gold/messages row to the one-row table gold/as_of (no row lost)\n")


def summary(result) -> str:
    rolled_back = f"correlake: rolled back the unfinished run {result.rolled_back} first\n" if result.rolled_back else ""
    outbox = ("" if result.outbox_migrated is None else
              f"correlake: migrated delivery/outbox to contract revision 3 first: its {result.outbox_migrated} events "
              "got their ordering key, each keeping its event_id, sequence, partition and payload\n")
    return rolled_back + (MIGRATED if result.migrated else "") + outbox + _summary(result)


def _summary(result) -> str:
    if result.nothing_new:
        if result.as_of_before is None:
            as_of = "" if result.as_of is None else f" (as_of {_iso(result.as_of)})"  # None: no records yet
            return f"correlake: nothing new to ingest; no table changed{as_of}"
        move = f"as_of {_iso(result.as_of_before)} → {_iso(result.as_of)}"
        if result.run_id is None:
            return f"correlake: nothing new to ingest; dry run: would re-evaluate the statuses of gold/messages ({move})"
        due = f"; {result.outbox_events} held-back outbox events fell due" if result.outbox_events else ""
        return (f"correlake: nothing new to ingest; statuses of gold/messages re-evaluated ({move}): "
                f"{result.statuses_changed} changed{due}, "
                f"recorded as run {result.run_id}")
    lines = [
        f"correlake {'rebuild' if result.rebuild else 'run'} {result.run_id}",
        f"  bronze   files {result.files}, records read {result.records_read}, "
        f"replays {result.replays}, quarantined {result.quarantined_total}" + (
            f", exporter records {result.engine_records} (ignored kinds {result.ignored_records})"
            if result.engine_records else ""),
    ]
    for reason, count, where in result.top_quarantine_reasons(10):
        lines.append(f"           {count:>7}  {reason}  (first: {where})")
    lines += [
        f"  silver   new messages {result.new_messages}, new workflow events {result.new_workflow_events}, "
        f"key groups recomputed {result.touched_groups}" + ("" if result.mapped is None else
                                                             f", exporter records mapped {result.mapped}, "
                                                             f"not mapped (yet) {result.unmapped}"),
        f"  gold     correlations (recomputed groups) {result.correlations}, as_of {_iso(result.as_of)}"
        + (f", path {result.path}" if result.path else ""),
        f"  outbox   new events {result.outbox_events}" + (
            " (the lake's first outbox: an event for every gold correlation)" if result.outbox_backfilled else ""),
        "  timings  " + ", ".join(f"{stage} {secs:.1f}s" for stage, secs in result.timings.items()),
    ]
    if result.engine_correlations or result.engine_duplicates:  # the engine's own (contract revision 4)
        lines.insert(-1, f"  engine   correlations recorded {result.engine_correlations}, later records of a "
                     f"correlated pair {result.engine_duplicates} (kept in bronze only)")
    if result.not_read:  # refused when read: left in the landing, for a later run
        lines.append(warning([f"{path} ({why})" for path, why in sorted(result.not_read.items())]))
    return "\n".join(lines)


def findings(spark, lake: str) -> str:
    """A few lines on what gold holds."""
    messages = spark.read.format("delta").load(table_path(lake, "messages"))
    correlations = spark.read.format("delta").load(table_path(lake, "correlations"))
    instances = spark.read.format("delta").load(table_path(lake, "message_started_instances"))
    statuses = {r["status"]: r["count"] for r in messages.groupBy("status").count().collect()}
    lines = ["gold:", "  messages     " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))]
    by_process = correlations.groupBy("bpmn_process_id", "subscription_type").count().orderBy("bpmn_process_id")
    for r in by_process.collect():
        lines.append(f"  correlated   {r['count']:>6}  to {r['bpmn_process_id']} ({r['subscription_type']})")
    active = instances.where("ended_at IS NULL").count()
    lines.append(f"  instances    {instances.count()} started by messages, {active} still active")
    return "\n".join(lines)
