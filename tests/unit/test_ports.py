"""The tests' ports (tests/support/ports.py): one for a server started next is one the kernel
gives no socket on its own (outside its ephemeral range) and is not handed out twice; one
where nothing may listen refuses connections and cannot be taken while it is held."""

from __future__ import annotations

import errno
import socket

import pytest
from support.ports import EPHEMERAL, free_port, refused_port


def test_a_servers_port_is_outside_the_ephemeral_range_free_and_never_handed_out_twice():
    low, high = map(int, EPHEMERAL.read_text().split())
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports) and not [p for p in ports if low <= p <= high]
    with socket.socket() as taken:  # what bind(0) gives is in the range: never one of ours
        taken.bind(("127.0.0.1", 0))
        assert low <= taken.getsockname()[1] <= high
    for port in ports[:20]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_refused_port_refuses_and_cannot_be_taken_while_held():
    with refused_port() as port:
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", port))
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))
        assert taken.value.errno == errno.EADDRINUSE
