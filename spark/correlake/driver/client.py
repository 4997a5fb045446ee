"""A call of a served function: on the driver at `CORRELAKE_DRIVER`, else on the kept
driver (`kept.py`), else in this process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from multiprocessing import AuthenticationError
from pathlib import Path
from typing import TypeVar

from correlake import progress
from correlake.config import driver_socket, progress_wanted
from correlake.driver import kept
from correlake.driver.calls import name_of
from correlake.driver.protocol import DriverError, Progress, connect
from correlake.errors import EXIT_ERROR

T = TypeVar("T")


class RemoteError(DriverError):
    """An error other than correlake's own, raised on the driver: its type, message and traceback."""

    exit_code = EXIT_ERROR


def call(function: Callable[..., T], *args, **kwargs) -> T:
    """`function`(spark, *args, **kwargs) (one of `calls.SERVED`) on the driver at
    `CORRELAKE_DRIVER`, else on the kept driver (`kept.py`), else here."""
    name = name_of(function)
    if name is None:
        raise ValueError(f"a driver does not serve {function.__module__}.{function.__qualname__}")
    address, wanted = driver_socket(), progress_wanted()
    conn = _connect_kept() if address is None else _connect_named(address)
    if conn is None:
        from correlake.runtime.session import get_spark

        with progress.to(progress.stderr if wanted else None):
            return function(get_spark(), *args, **kwargs)
    with conn:
        try:
            conn.send((name, args, kwargs, wanted))
            while isinstance(reply := conn.recv(), Progress):
                progress.stderr(reply.text)
            ok, value = reply
        except (EOFError, OSError):
            raise DriverError(f"the driver stopped during {name}; the lake's journal rolls back what it left "
                              "unfinished at the next run") from None
    if ok:
        return value
    raise value


def _connect_named(address: Path):
    """A connection to the driver at CORRELAKE_DRIVER; None (run here) if none serves it."""
    try:
        return connect(address)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        print(f"correlake: no driver serves {address} ({exc.strerror}); running in this process", file=sys.stderr)
        return None
    except (OSError, EOFError, AuthenticationError) as exc:  # a key of another driver, one just stopping
        raise DriverError(f"cannot call the driver at {address} ({type(exc).__name__}: {exc}); "
                          "try again, or unset CORRELAKE_DRIVER to run in this process") from None


def _connect_kept():
    """A connection to the kept driver, started if none serves; None if none is kept."""
    if (address := kept.address()) is None:
        return None
    try:
        return connect(address)
    except (OSError, EOFError, AuthenticationError):  # none serves yet, or it stopped, idle, as it was called
        kept.start(address)
    try:
        return connect(address)
    except (OSError, EOFError, AuthenticationError) as exc:
        raise DriverError(f"cannot call the kept driver at {address} ({type(exc).__name__}: {exc}); "
                          "CORRELAKE_KEEP_DRIVER=0 runs in this process") from None
