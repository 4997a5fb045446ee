"""The `correlake` command line: run, rebuild, watch, demo, maintain, deliver, serve, sql, explain, report, audit."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback

from correlake.config import validate
from correlake.errors import EXIT_ERROR, EXIT_USAGE, CorrelakeError, Terminated, published_before
from correlake.interfaces.commands import (
    audit,
    deliver,
    demo,
    explain,
    maintain,
    rebuild,
    report,
    run,
    serve,
    sql,
    watch,
)
from correlake.text import escaped_output

COMMANDS = (run, rebuild, watch, demo, maintain, deliver, serve, sql, explain, report, audit)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="correlake", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(main=command.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    from correlake.runtime.signals import interrupt_quietly

    parser = build_parser()
    args = parser.parse_args(argv)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt_quietly(Terminated))  # as Ctrl-C: a run in progress rolls back
    with escaped_output():  # what reaches the terminal: no control character of a value or a file name
        try:
            validate()
            return args.main(args)
        except KeyboardInterrupt as exc:
            return _stopped(exc)
        except Exception as exc:  # set-up, driver and machine problems surface as a clear error, not a traceback
            return _failed(exc)
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, on_sigterm)


def _failed(exc: Exception) -> int:
    """Say why a command failed; its exit code. correlake's own errors say it in their
    message and carry their code; a full disk or a refused file is a usage problem."""
    if interrupt := _interrupt(exc):  # raised while it rolled back (a JVM stopped by the same signal)
        return _stopped(interrupt)
    unexpected = not isinstance(exc, CorrelakeError) or exc.exit_code == EXIT_ERROR  # RemoteError: the driver's
    if unexpected and (problem := _machine_problem(exc)):
        print(f"correlake: {problem}; nothing of the run was published (what it had begun to write was "
              "rolled back, or is by the next run)", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, CorrelakeError):  # a RemoteError's message holds the driver's traceback
        print(f"correlake: {exc}", file=sys.stderr)
    else:
        traceback.print_exc()
    if unexpected:
        print(f"correlake: unexpected error ({type(exc).__name__}, traceback above); nothing of the run was "
              "published (a run that had begun to write is rolled back by the next)", file=sys.stderr)
        return EXIT_ERROR
    return exc.exit_code


def _stopped(interrupt: KeyboardInterrupt) -> int:
    """Say what an interrupt stopped: a run in progress, or the clean-up after a run it published."""
    stopped = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
    if (published := published_before(interrupt)) is not None:
        print(f"correlake: stopped by {stopped.name} after run {published.run_id} was published (the lake "
              "holds it; only the process's clean-up was cut short)", file=sys.stderr)
    else:
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
