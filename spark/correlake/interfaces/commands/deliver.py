"""`correlake deliver`: one bounded pass that sends the outbox's due events to a sink."""

from __future__ import annotations

import argparse

from correlake import config, progress
from correlake.config import progress_wanted
from correlake.delivery.sinks import SINKS, open_sink
from correlake.errors import EXIT_OK, UsageError
from correlake.interfaces import options


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("deliver", help="send the outbox's due events to a webhook or RabbitMQ, in order per key")
    options.add_lake(parser)
    add_sink_options(parser, required=True)
    parser.add_argument("--requeue-dead-letters", action="store_true",
                        help="first put dead letters (CANCELLED, EXPIRED) back to PENDING")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--event-id", help="with --requeue-dead-letters: only this event")
    which.add_argument("--message-key", type=int, help="with --requeue-dead-letters: only this message's events")
    return parser


def add_sink_options(parser: argparse.ArgumentParser, required: bool) -> None:
    """The sink and a pass's settings (`deliver`, and `watch`, where the sink is optional)."""
    parser.add_argument("--sink", required=required, choices=SINKS, help="where the events go")
    parser.add_argument("--url", help="the webhook's URL (http:// or https://); signing secret: $"
                        f"{config.WEBHOOK_SECRET_ENV}[_FILE]; its user's password: ${config.SINK_PASSWORD_ENV}[_FILE]")
    parser.add_argument("--amqp-url", help="the RabbitMQ broker (amqp:// or amqps://); its user's password: $"
                        f"{config.SINK_PASSWORD_ENV}[_FILE]")
    parser.add_argument("--partitions", type=options.positive, default=config.DELIVERY_PARTITIONS, metavar="N",
                        help="route each ordering key to one of N partitions (default %(default)s)")
    parser.add_argument("--max-seconds", type=options.seconds, default=config.DELIVERY_MAX_SECONDS,
                        help="start no new round after this long (default %(default)s)")
    parser.add_argument("--timeout", type=options.time_limit, default=config.WEBHOOK_TIMEOUT_SECONDS,
                        help="a webhook call's time limit, in seconds (default %(default)s)")
    parser.add_argument("--retry-base", type=options.seconds, default=config.DELIVERY_RETRY_BASE_SECONDS,
                        help="back-off of a retry: uniform(0, min(cap, base*2^(attempt-1))) s (default %(default)s)")
    parser.add_argument("--retry-cap", type=options.seconds, default=config.DELIVERY_RETRY_CAP_SECONDS,
                        help="the longest back-off, in seconds (default %(default)s)")
    parser.add_argument("--delivery-ttl", type=options.seconds, default=config.DELIVERY_TTL_SECONDS,
                        metavar="SECONDS", help="an event not acknowledged this long after its first attempt "
                        "expires (default %(default)s)")


def opened_sink(args: argparse.Namespace):
    """The sink the options name, opened (a context manager), with the secrets of the
    environment or their files; UsageError without its URL."""
    url = args.url if args.sink == "webhook" else args.amqp_url
    if not url:
        raise UsageError(f"--sink {args.sink} needs {'--url' if args.sink == 'webhook' else '--amqp-url'}")
    return open_sink(args.sink, url, config.secret(config.WEBHOOK_SECRET_ENV), args.timeout,
                     password=config.secret(config.SINK_PASSWORD_ENV))


def pass_settings(args: argparse.Namespace, requeue=None):
    """A pass's settings from the options."""
    from correlake.delivery import deliver as delivery

    return delivery.Settings(args.partitions, args.max_seconds, args.delivery_ttl, args.retry_base, args.retry_cap,
                             requeue)


def main(args: argparse.Namespace) -> int:
    from correlake.delivery import deliver as delivery
    from correlake.lake import preflight

    preflight.require_folder(args.lake)
    if (args.event_id is not None or args.message_key is not None) and not args.requeue_dead_letters:
        raise UsageError("--event-id and --message-key go with --requeue-dead-letters")
    requeue = delivery.Requeue(args.event_id, args.message_key) if args.requeue_dead_letters else None
    with opened_sink(args) as sink, progress.to(progress.stderr if progress_wanted() else None):
        result = delivery.deliver(args.lake, sink, pass_settings(args, requeue))  # DeliveryBusy: exit 0
    print(delivery.summary(result))
    return EXIT_OK

