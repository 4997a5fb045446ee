"""What a correlake command can end with: its exit codes, and the one base of correlake's
errors, which carries its exit code and whether a retry can help."""

from __future__ import annotations

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3


class CorrelakeError(Exception):
    """An error correlake raises on purpose, with a message for the user: a command exits
    with `exit_code`, an Airflow task retries only if `retryable` (a retry may meet
    another state: a busy lake, a driver that stopped), and a driver sends it to its caller
    as it is."""

    exit_code = EXIT_USAGE
    retryable = False


class UsageError(CorrelakeError):
    """A command given what it cannot work with (a missing folder, a bad option)."""


class SetupError(CorrelakeError):
    """The environment is not ready (missing JARs, Java), or Spark refused its settings."""


class DeliveryError(CorrelakeError):
    """A sink that cannot be used at all (a bad URL, a refused declaration)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a supervisor, Airflow, systemd stopping the process), handled as Ctrl-C is."""


def published_before(interrupt: KeyboardInterrupt):
    """The run that `pipeline.run` had published when `interrupt` came (it tags it so), or None."""
    return getattr(interrupt, "published", None)


def first_line(error: BaseException) -> str:
    """An error's first line (a Spark error's class and message, not its plan or stack)."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
