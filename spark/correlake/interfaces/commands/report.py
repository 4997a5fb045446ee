"""`correlake report`: one self-contained HTML page on a lake — activity per hour,
correlation latency, the buffered backlog, unmatched messages, start-event lock waits,
quarantine reasons, and the last run with its gates.

Every figure is a Spark SQL aggregate over the analyst views, one query of `sql/report/`
each (`analysis/report_data.py`), on the warm driver if one serves; `report_page.py` draws
them as inline SVG (`charts.py`): the page loads nothing at view time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from correlake.analysis import report_data
from correlake.config import absolute
from correlake.errors import EXIT_OK
from correlake.interfaces import options
from correlake.interfaces.commands.report_page import page


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("report", help="write a self-contained HTML report with charts on a lake")
    options.add_lake(parser)
    parser.add_argument("--out", type=options.out_file, default="report.html",
                        help="HTML file to write (default report.html)")
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.driver import client
    from correlake.lake.catalog import require_gold, unfinished_warning

    require_gold(args.lake)  # MissingTables: a UsageError
    if warning := unfinished_warning(args.lake):
        print(warning, file=sys.stderr)
    data = client.call(report_data.gather, absolute(args.lake))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(data, args.lake), encoding="utf-8")
    print(f"report: {out}")
    return EXIT_OK
