"""`correlake report`'s figures: every one a Spark SQL aggregate over the analyst views
(`catalog.py`), one query of `sql/report/` each; only those small results leave Spark.
The page that draws them is `interfaces/commands/report_page.py`."""

from __future__ import annotations

import time

from correlake import progress
from correlake.analysis import audit
from correlake.contract.reasons import reason_kind_sql
from correlake.delivery.events import STATUSES
from correlake.lake.sqlfiles import fill

# the queries, `sql/report/<name>.sql`; the delivery ones (docs/delivery.md) only on a lake
# whose events a `correlake deliver` pass has seen
QUERIES = ("headline_counts", "activity_per_hour", "latency_histogram", "busiest_latency_percentiles",
           "backlog_per_hour", "unmatched_by_name", "unmatched_by_key", "lock_wait_outcomes", "closed_without_message",
           "duplicate_rejection_rates", "quarantine_reasons", "recent_runs", "unmatched_reasons",
           "unmatched_reasons_per_hour", "top_near_misses", "near_miss_kinds")
DELIVERY_QUERIES = ("delivery_statuses", "busiest_delivery_latency", "dead_letter_reasons")
ENGINE_QUERIES = tuple(audit.QUERIES.values())  # only on a lake of exporter records
COSTLY_VIEWS = ["explanations", "near_misses"]  # each read by several queries: computed once
TIME = "'yyyy-MM-dd HH:mm'"  # the queries' times ({time}), as the page's hour labels read them


def queries() -> dict[str, str]:
    """The SQL of every report query, by name, its placeholders filled: {time} the times'
    format, {reason_kind} a quarantine reason's kind, {delivery_statuses} every status."""
    params = {"time": TIME, "reason_kind": reason_kind_sql("reason"),
              "delivery_statuses": ", ".join(f"('{status}')" for status in STATUSES)}
    return {name: fill(f"report/{name}", **params) for name in (*QUERIES, *DELIVERY_QUERIES, *ENGINE_QUERIES)}


def gather(spark, lake: str) -> dict[str, list[dict]]:
    """The result rows of every report query (small aggregates), by name."""
    from correlake.lake.catalog import computed_once, register

    sql = queries()
    registered = register(spark, lake, list(sql.values()))
    names = (QUERIES + (DELIVERY_QUERIES if "delivery_events" in registered else ())
             + (ENGINE_QUERIES if audit.has_engine_records(lake) else ()))
    found, started = {}, time.perf_counter()
    with computed_once(spark, COSTLY_VIEWS, registered) as once:
        if once:
            progress.step(f"report: {' and '.join(once)} computed in {time.perf_counter() - started:.1f} s")
        for i, name in enumerate(names, 1):
            started = time.perf_counter()
            found[name] = [row.asDict() for row in spark.sql(sql[name]).collect()]
            progress.step(f"report: {i}/{len(names)} {name} in {time.perf_counter() - started:.1f} s")
    return found


def reason_counts(spark, lake: str) -> dict[str, int]:
    """How many messages and subscriptions did not correlate, by kind and reason, and how many
    of them have a near miss of each kind (what the hourly DAG's stats publish)."""
    from correlake.lake.catalog import computed_once, register

    sql = queries()
    registered = register(spark, lake, [sql["unmatched_reasons"], sql["near_miss_kinds"]])
    with computed_once(spark, COSTLY_VIEWS, registered):
        return {r["label"]: r["n"] for name in ("unmatched_reasons", "near_miss_kinds")
                for r in spark.sql(sql[name]).collect()}
