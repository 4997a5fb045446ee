"""`correlake audit`: where correlake and the engine whose exporter records the lake reads
disagree — the view `engine_differences` by difference and explanation, and its first rows
(`analysis/audit.py`, on the warm driver if one serves). Exit 0 without a difference, 1 with
one, 2 for a usage error (a lake of the canonical streams has no engine to audit)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from correlake.analysis import audit
from correlake.config import absolute
from correlake.errors import EXIT_OK, UsageError
from correlake.interfaces import options

EXIT_DIFFERENT = 1


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "audit", help="compare gold's correlations with the engine's own (a lake of Zeebe exporter records)",
        description="Compare gold/correlations with gold/engine_correlations, the correlations the engine "
                    "exported: the view engine_differences counted by difference and explanation, and its "
                    "first rows. Exit 0 when they agree, 1 when they differ.")
    options.add_lake(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object {counts, rows} instead")
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.driver import client
    from correlake.lake import catalog

    catalog.require_gold(args.lake)
    if not audit.has_engine_records(args.lake):
        raise UsageError(f"{args.lake} holds no Zeebe exporter records (no bronze/engine_records): "
                         "there is no engine to audit")
    if warning := catalog.unfinished_warning(args.lake):
        print(warning, file=sys.stderr)
    found = client.call(audit.audited, absolute(args.lake))
    print(json.dumps(found, default=_iso, ensure_ascii=False) if args.json else told(found, args.lake))
    return EXIT_DIFFERENT if found["counts"] else EXIT_OK


def told(found: dict[str, list[dict]], lake: str) -> str:
    """The audit as text: the counts, then the first rows, one a line."""
    total = sum(r["n"] for r in found["counts"])
    if not total:
        return f"{lake}: no difference: the engine and correlake correlated the same messages to the same targets"
    lines = [f"{lake}: {total} difference{'s' * (total != 1)} between gold/correlations and the engine's "
             "(view engine_differences)"]
    lines += [f"  {r['difference']:<15} {r['explanation'] or '-':<28} {r['n']:>7}" for r in found["counts"]]
    lines.append(f"the first {len(found['rows'])}:" if len(found["rows"]) < total else "each:")
    for r in found["rows"]:
        sides = "; ".join(f"{side} {audit.target(r, side)}" for side in audit.SIDES)
        lines.append(f"  {r['difference']} {r['explanation'] or '-'}: message {r['message_key']} "
                     f"(tenant {r['tenant_id']}, {r['message_name']!r}, key {r['correlation_key']!r}) to "
                     f"{r['bpmn_process_id']}: {sides}")
    return "\n".join(lines)


def _iso(value) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    raise TypeError(f"not JSON: {type(value).__name__}")
