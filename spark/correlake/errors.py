"""What a correlake command can end with: its exit codes and the errors that map to them."""

from __future__ import annotations

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3


class UsageError(Exception):
    """A command given what it cannot work with (a missing folder, a bad option): exit 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a supervisor, Airflow, systemd stopping the process), handled as Ctrl-C is."""


def published_before(interrupt: KeyboardInterrupt):
    """The run that `pipeline.run` had published when `interrupt` came (it tags it so), or None."""
    return getattr(interrupt, "published", None)


def first_line(error: BaseException) -> str:
    """An error's first line (a Spark error's class and message, not its plan or stack)."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)


class DeliveryError(Exception):
    """A sink that cannot be used at all (a bad URL, a refused declaration): exit 2."""
