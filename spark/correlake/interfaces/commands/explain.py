"""`correlake explain`: why a message did not correlate, or a subscription got no message —
each selected object's story in the total order, its reason and near misses, read from
the views `explanations` and `near_misses` (`sql/views/`, the one place the reasons are
spelled) through the catalog of `correlake sql` (`analysis/explain.py`, on the warm driver
if one serves)."""

from __future__ import annotations

import argparse
import sys

from correlake.config import absolute
from correlake.errors import EXIT_OK, UsageError
from correlake.interfaces import options


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


def main(args: argparse.Namespace) -> int:
    from correlake.analysis import explain
    from correlake.driver import client
    from correlake.lake import catalog

    on_messages, on_subscriptions = selectors(args)
    catalog.require_gold(args.lake)
    if warning := catalog.unfinished_warning(args.lake):
        print(warning, file=sys.stderr)
    print(client.call(explain.told, absolute(args.lake), on_messages, on_subscriptions, args.json,
                      f"{args.lake} matches {_said(args)}"))
    return EXIT_OK


def _said(args: argparse.Namespace) -> str:
    parts = [f"--{name.replace('_', '-')} {value}" for name, value in vars(args).items()
             if name in ("message_key", "name", "correlation_key", "element_instance_key", "message_name", "tenant")
             and value is not None]
    return " ".join(parts)

