"""The `correlake` command line: run, rebuild, demo, maintain, serve, sql, report."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import traceback

from correlake.interfaces import options
from correlake.config import MAX_QUARANTINE_RATIO, ConfigError, default_driver_socket, demo_dir, validate
from correlake.errors import EXIT_ERROR, EXIT_GATE, EXIT_OK, EXIT_USAGE, Terminated, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="correlake", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="ingest new landing files and update silver and gold")
    run.add_argument("--landing", required=True, help="landing folder (messages/, workflow_events/)")
    options.add_lake(run)
    run.add_argument("--max-quarantine-ratio", type=options.ratio, default=None,
                     help="fail when more than this share of the records read is quarantined "
                          f"(default: $CORRELAKE_MAX_QUARANTINE_RATIO, else {MAX_QUARANTINE_RATIO})")
    options.add_run_options(run)
    run.set_defaults(func=cmd_run)

    rebuild = sub.add_parser("rebuild", help="recompute silver and gold from bronze")
    options.add_lake(rebuild)
    options.add_run_options(rebuild)
    rebuild.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="write a sample landing and run the pipeline on it")
    demo.add_argument("--dir", default=str(demo_dir()), help="demo folder (landing/ and lake/); default %(default)s")
    demo.add_argument("--hours", type=options.positive, default=3, help="hours of sample traffic; default %(default)s")
    demo.add_argument("--seed", type=int, default=7, help="seed of the sample traffic; default %(default)s")
    demo.set_defaults(func=cmd_demo)

    maintain = sub.add_parser("maintain", help="compact, purge deletion vectors, vacuum and checkpoint every table")
    options.add_lake(maintain)
    maintain.add_argument("--retain-hours", type=options.hours, default=None,
                          help="VACUUM retention (default: Delta's 168 h; a smaller value overrides its check)")
    maintain.add_argument("--dry-run", action="store_true", help="change nothing; report what VACUUM would delete")
    options.add_wait(maintain)
    maintain.set_defaults(func=cmd_maintain)

    serve = sub.add_parser("serve", help="a long-lived Spark driver that runs take turns on (CORRELAKE_DRIVER)")
    serve.add_argument("--socket", default=str(default_driver_socket()),
                       help="Unix socket to listen on (default: $CORRELAKE_DRIVER, else <state>/driver.sock)")
    serve.add_argument("--warm-up", type=options.count, default=2, metavar="ROUNDS",
                       help="before serving, a synthetic first run and this many increments (0: none)")
    serve.set_defaults(func=cmd_serve)

    from correlake.interfaces import sql as query, report  # analyst commands: each sets its `func`

    query.add_parser(sub)
    report.add_parser(sub)
    return parser


def cmd_run(args) -> int:
    from pathlib import Path

    from correlake.run import driver
    from correlake.quality.gates import GateFailed
    from correlake.lake.lock import LakeBusy, check_free
    from correlake.lake.tables import require_bronze

    rebuild = args.command == "rebuild"
    if rebuild:
        require_bronze(args.lake)
    else:
        from correlake.lake.landing import check_locations, unread_warning

        check_locations(args.landing, args.lake)
        if warning := unread_warning(args.landing):
            print(warning, file=sys.stderr)
    started = time.perf_counter()
    landing, lake_dir = (None if rebuild else str(Path(args.landing).resolve())), str(Path(args.lake).resolve())
    try:  # absolute paths: a driver has its own working directory
        if not args.wait:
            check_free(lake_dir)  # before Spark starts
        result = driver.call("run", landing, lake_dir, as_of=args.as_of,
                             max_quarantine_ratio=getattr(args, "max_quarantine_ratio", None),
                             wait_seconds=args.wait, rebuild=rebuild, dry_run=args.dry_run)
    except GateFailed as exc:
        print(f"correlake: FAILED — {exc}", file=sys.stderr)
        print("Gold was left as it was; nothing of this run was kept.", file=sys.stderr)
        return EXIT_GATE
    except LakeBusy as exc:
        print(f"correlake: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result.timings["total"] = round(time.perf_counter() - started, 2)
    from correlake.run.summary import summary

    print(summary(result))
    if args.dry_run and not result.nothing_new:
        print("dry run: every gate passed; nothing was published")
    return EXIT_OK


def _same_demo(root, params: dict) -> None:
    """A demo folder holds one demo: the same again is a no-op; other hours or another seed
    would rewrite its files with other records at the same positions (conflicts)."""
    record = root / "demo.json"
    if record.exists():
        held = json.loads(record.read_text())
        if held != params:
            def flags(p):
                return f"--hours {p['hours']} --seed {p['seed']}"
            raise UsageError(f"{root} holds the demo of {flags(held)}; for {flags(params)} give another --dir "
                             "(or remove that folder)")
    else:
        root.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(params))


def cmd_demo(args) -> int:
    from pathlib import Path

    from correlake.samples.demo import write_demo_landing

    root = Path(args.dir).resolve()
    landing, lake_dir = root / "landing", root / "lake"
    _same_demo(root, {"hours": args.hours, "seed": args.seed})
    counts = write_demo_landing(landing, hours=args.hours, seed=args.seed)
    print(f"demo landing: {landing} ({counts['messages']} messages, {counts['workflow_events']} workflow events, "
          f"{counts['bad']} bad lines)")
    code = cmd_run(argparse.Namespace(command="run", landing=str(landing), lake=str(lake_dir), as_of=None,
                                      max_quarantine_ratio=None, wait=0.0, dry_run=False))
    if code == EXIT_OK:
        from correlake.run.driver import call

        print(call("findings", str(lake_dir)))
        print(f"demo lake: {lake_dir} (its views: ./correlake sql --lake {lake_dir} --list)")
    return code


def cmd_maintain(args) -> int:
    from correlake.lake.maintenance import command

    return command(args)


def cmd_serve(args) -> int:
    from pathlib import Path

    from correlake.run.driver import serve

    try:
        serve(Path(args.socket).resolve(), args.warm_up)
    except Terminated:  # how a supervisor stops it
        print("correlake driver: stopped by SIGTERM", flush=True)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    from correlake.session import interrupt_quietly

    parser = build_parser()
    args = parser.parse_args(argv)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt_quietly(Terminated))  # as Ctrl-C: a run in progress rolls back
    try:
        validate()
        return args.func(args)
    except (UsageError, ConfigError) as exc:
        print(f"correlake: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        return _stopped(exc)
    except Exception as exc:  # set-up, driver and machine problems surface as a clear error, not a traceback
        from correlake.run.driver import DriverError, RemoteError
        from correlake.lake.journal import UnreadableJournal
        from correlake.session import SetupError

        if interrupt := _interrupt(exc):  # raised while it rolled back (a JVM stopped by the same signal)
            return _stopped(interrupt)
        if problem := _machine_problem(exc):
            print(f"correlake: {problem}; nothing of the run was published (what it had begun to write was "
                  "rolled back, or is by the next run)", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, RemoteError):  # unexpected on the driver: its text holds the driver's traceback
            print(exc, file=sys.stderr)
        elif isinstance(exc, (SetupError, UnreadableJournal, DriverError)):
            print(f"correlake: {exc}", file=sys.stderr)
            return EXIT_USAGE
        else:
            traceback.print_exc()
        print(f"correlake: unexpected error ({type(exc).__name__}, traceback above); nothing of the run was "
              "published (a run that had begun to write is rolled back by the next)", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_sigterm)


def _stopped(interrupt: KeyboardInterrupt) -> int:
    stopped = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
    print(f"correlake: stopped by {stopped.name}; nothing of a run in progress was published (what it had "
          "begun to write was rolled back, or is by the next run)", file=sys.stderr)
    return 128 + stopped


def _causes(exc: BaseException | None):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _interrupt(exc: BaseException) -> KeyboardInterrupt | None:
    return next((e for e in _causes(exc) if isinstance(e, KeyboardInterrupt)), None)


MACHINE_PROBLEMS = ("No space left on device", "Disk quota exceeded", "Permission denied", "Read-only file system")


def _machine_problem(exc: BaseException) -> str | None:
    """One line on a failure of the machine rather than of correlake (a full disk, a file
    it may not write), from a Python error or the causes in a Java one; else None."""
    for e in _causes(exc):
        if isinstance(e, OSError) and e.strerror in MACHINE_PROBLEMS:
            return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
        try:
            text = str(e)  # a Java exception's text holds its causes
        except Exception:  # asked of a JVM that is gone
            continue
        for line in text.splitlines():
            if any(problem in line for problem in MACHINE_PROBLEMS):
                return line.strip().removeprefix("Caused by: ")
    return None


if __name__ == "__main__":
    sys.exit(main())
