"""TCP ports of 127.0.0.1 for the tests' servers, without races: one for a server started
next is outside the kernel's ephemeral range, which the kernel hands to no socket on its
own (an outgoing connection, a bind to port 0, in this process or another), and never
the same twice in this process; one where nothing may listen is held bound meanwhile."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()
_draw = random.SystemRandom()  # not the tests' seeded draws: two sessions at once pick apart


def free_port() -> int:
    """A port nothing is bound to now, below the ephemeral range (or above it, if that
    starts low), not handed out before in this process: for a server given it on its
    command line."""
    low, high = map(int, EPHEMERAL.read_text().split())
    ports = range(10_000, low) if low > 11_000 else range(high + 1, 65_536)
    while True:
        port = _draw.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # taken, or in TIME_WAIT
                continue
        _handed_out.add(port)
        return port


@contextmanager
def refused_port() -> Iterator[int]:
    """A port held bound, never listening, while the block runs: a connection to it is
    refused, and nothing else takes it meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]
