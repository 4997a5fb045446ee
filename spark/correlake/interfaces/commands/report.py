"""`correlake report`: one self-contained HTML page on a lake — activity per hour,
correlation latency, the buffered backlog, unmatched messages, start-event lock waits,
quarantine reasons, and the last run with its gates.

Every figure is a Spark SQL aggregate over the analyst views (`catalog.py`), one query of
`sql/report/` each; only those small results reach the driver. `report_page.py` draws
them as inline SVG (`charts.py`): the page loads nothing at view time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from correlake.contract.reasons import reason_kind_sql
from correlake.delivery.events import STATUSES
from correlake.errors import EXIT_OK
from correlake.interfaces import options
from correlake.interfaces.commands.report_page import TIME, page
from correlake.lake.sqlfiles import fill

# the queries, `sql/report/<name>.sql`; the delivery ones (docs/delivery.md) only on a lake
# whose events a `correlake deliver` pass has seen
QUERIES = ("headline_counts", "activity_per_hour", "latency_histogram", "busiest_latency_percentiles",
           "backlog_per_hour", "unmatched_by_name", "unmatched_by_key", "lock_wait_outcomes", "closed_without_message",
           "duplicate_rejection_rates", "quarantine_reasons", "recent_runs")
DELIVERY_QUERIES = ("delivery_statuses", "busiest_delivery_latency", "dead_letter_reasons")


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("report", help="write a self-contained HTML report with charts on a lake")
    options.add_lake(parser)
    parser.add_argument("--out", type=options.out_file, default="report.html",
                        help="HTML file to write (default report.html)")
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.lake.catalog import require_gold, unfinished_warning
    from correlake.runtime.session import get_spark

    require_gold(args.lake)  # MissingTables: a UsageError
    if warning := unfinished_warning(args.lake):
        print(warning, file=sys.stderr)
    data = gather(get_spark(), args.lake)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(data, args.lake), encoding="utf-8")
    print(f"report: {out}")
    return EXIT_OK


def queries() -> dict[str, str]:
    """The SQL of every report query, by name, its placeholders filled: {time} the times'
    format, {reason_kind} a quarantine reason's kind, {delivery_statuses} every status."""
    params = {"time": TIME, "reason_kind": reason_kind_sql("reason"),
              "delivery_statuses": ", ".join(f"('{status}')" for status in STATUSES)}
    return {name: fill(f"report/{name}", **params) for name in (*QUERIES, *DELIVERY_QUERIES)}


def gather(spark, lake: str) -> dict[str, list[dict]]:
    """The result rows of every report query (small aggregates), by name."""
    from correlake.lake.catalog import register

    sql = queries()
    registered = register(spark, lake, list(sql.values()))
    names = QUERIES + (DELIVERY_QUERIES if "delivery_events" in registered else ())
    return {name: [row.asDict() for row in spark.sql(sql[name]).collect()] for name in names}
