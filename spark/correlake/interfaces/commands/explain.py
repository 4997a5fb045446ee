"""`correlake explain`: why a message did not correlate, or a subscription got no message —
each selected object's story in the total order, its reason and near misses, read from
the views `explanations` and `near_misses` (`sql/views/`, the one place the reasons are
spelled) through the catalog of `correlake sql`."""

from __future__ import annotations

import argparse
import json
import sys

from correlake.errors import EXIT_OK, UsageError
from correlake.interfaces import options

EXPLANATION = ("kind", "tenant_id", "message_key", "element_instance_key", "message_name", "reason",
               "related_message_key", "related_element_instance_key", "gap_ms")
# What a story reads besides the two views
STORY_TABLES = "gold_messages gold_subscriptions gold_correlations gold_message_started_instances gold_as_of"


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "explain", help="why a message did not correlate, or a subscription got no message",
        description="Tell each selected message's or subscription's story in the total order, with the first "
                    "reason it did not correlate (the view explanations) and its near misses (near_misses). "
                    "Select by --message-key; by --name and --correlation-key; or by --element-instance-key.")
    options.add_lake(parser)
    parser.add_argument("--message-key", type=int, help="the message of this key (its position)")
    parser.add_argument("--name", help="with --correlation-key: the messages and subscriptions of this name")
    parser.add_argument("--correlation-key", help="with --name: … and this correlation key")
    parser.add_argument("--element-instance-key", help="the subscriptions of this element instance")
    parser.add_argument("--message-name", help="with --element-instance-key: only its subscription to this name")
    parser.add_argument("--tenant", help="with --name or --element-instance-key: only in this tenant")
    parser.add_argument("--json", action="store_true", help="print one JSON array of the explanations instead")
    return parser


def selectors(args: argparse.Namespace) -> tuple[dict | None, dict | None]:
    """The columns and values that select on gold_messages and on gold_subscriptions (None:
    none of that kind); UsageError unless exactly one selector is given whole."""
    given = [name for name, on in (("--message-key", args.message_key is not None),
                                   ("--name/--correlation-key", args.name is not None or args.correlation_key is not None),
                                   ("--element-instance-key", args.element_instance_key is not None)) if on]
    if len(given) != 1:
        raise UsageError("give one of --message-key K, --name N --correlation-key K, or --element-instance-key E"
                         + (f" (not {' and '.join(given)})" if given else ""))
    if args.message_name is not None and args.element_instance_key is None:
        raise UsageError("--message-name goes with --element-instance-key")
    if args.tenant is not None and args.message_key is not None:
        raise UsageError("--tenant goes with --name or --element-instance-key")
    tenant = {"tenant_id": args.tenant} if args.tenant is not None else {}
    if args.message_key is not None:
        return {"message_key": args.message_key}, None
    if args.element_instance_key is not None:
        name = {"message_name": args.message_name} if args.message_name is not None else {}
        return None, {"element_instance_key": args.element_instance_key, **name, **tenant}
    if args.name is None or args.correlation_key is None:
        raise UsageError("--name and --correlation-key go together")
    key = {"correlation_key": args.correlation_key, **tenant}
    return {"name": args.name, **key}, {"message_name": args.name, **key}


def matching(alternatives: list[dict]):
    """A Spark condition: the columns equal to the values of one of `alternatives` (literals,
    so that Delta can skip files)."""
    from functools import reduce

    from pyspark.sql import functions as F

    def equal(values: dict):
        return reduce(lambda a, b: a & b, (F.col(column) == value for column, value in values.items()), F.lit(True))

    return reduce(lambda a, b: a | b, map(equal, alternatives)) if alternatives else F.lit(False)


def main(args: argparse.Namespace) -> int:
    from correlake.interfaces.commands import explain_story
    from correlake.lake import catalog
    from correlake.runtime.session import get_spark

    on_messages, on_subscriptions = selectors(args)
    catalog.require_gold(args.lake)
    if warning := catalog.unfinished_warning(args.lake):
        print(warning, file=sys.stderr)
    spark = get_spark()
    catalog.register(spark, args.lake, [f"explanations near_misses {STORY_TABLES}"])

    def rows(table: str, alternatives: list[dict], *order: str) -> list[dict]:
        df = spark.table(table).where(matching(alternatives))
        return [r.asDict() for r in (df.orderBy(*order) if order else df).collect()]

    messages = rows("gold_messages", [on_messages] if on_messages else [], "published_at", "message_key")
    subscriptions = rows("gold_subscriptions", [on_subscriptions] if on_subscriptions else [],
                         "opened_at", "tenant_id", "element_instance_key", "message_name")
    if not messages and not subscriptions:
        raise UsageError(f"nothing in {args.lake} matches {_said(args)}")
    objects = [("MESSAGE", m) for m in messages] + [("SUBSCRIPTION", s) for s in subscriptions]
    which = [_identity(dict(obj, kind=kind)) for kind, obj in objects]
    explained = {_key(r): r for r in rows("explanations", which)}
    misses: dict[tuple, list[dict]] = {}
    for r in spark.table("near_misses").where(matching(which)).collect():  # closest first, as the view orders them
        misses.setdefault(_key(r.asDict()), []).append(r.asDict())
    results = []
    for kind, obj in objects:
        key = _key(dict(obj, kind=kind))
        row = explained.get(key) or _correlated(kind, obj)
        results.append((obj, dict(row, near_misses=misses.get(key, []))))
    if args.json:
        print(json.dumps([result for _, result in results], ensure_ascii=False))
    else:
        stories = explain_story.Stories(rows, messages, subscriptions)
        print("\n\n".join(stories.tell(obj, result) for obj, result in results))
    return EXIT_OK


def _identity(row: dict) -> dict:
    """An explained object's identifying columns, as the views name them."""
    if row["kind"] == "MESSAGE":
        return {"kind": "MESSAGE", "message_key": row["message_key"]}
    return {"kind": "SUBSCRIPTION", "tenant_id": row["tenant_id"], "element_instance_key": row["element_instance_key"],
            "message_name": row["message_name"]}


def _key(row: dict) -> tuple:
    return tuple(_identity(row).values())


def _correlated(kind: str, obj: dict) -> dict:
    """The explanation's columns for an object that correlated: no reason."""
    row = dict.fromkeys(EXPLANATION)
    row |= {"kind": kind, "tenant_id": obj["tenant_id"]}
    if kind == "MESSAGE":
        row["message_key"] = obj["message_key"]
    else:
        row |= {"element_instance_key": obj["element_instance_key"], "message_name": obj["message_name"]}
    return row


def _said(args: argparse.Namespace) -> str:
    parts = [f"--{name.replace('_', '-')} {value}" for name, value in vars(args).items()
             if name in ("message_key", "name", "correlation_key", "element_instance_key", "message_name", "tenant")
             and value is not None]
    return " ".join(parts)

