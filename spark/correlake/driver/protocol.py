"""The driver's transport: a Unix socket of mode 0600 and a key file of mode 0600 beside it;
a caller proves it holds the key, then sends one call and reads one reply."""

from __future__ import annotations

import os
import secrets
import socket
import stat
import struct
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from pathlib import Path

from correlake.config import DRIVER_HANDSHAKE_SECONDS
from correlake.errors import CorrelakeError

BACKLOG = 64  # callers waiting for the driver
READY = "correlake driver: serving"  # the line `serve` prints once it takes calls


class DriverError(CorrelakeError):
    """The driver failed, or is gone; a retry may find it serving again."""

    retryable = True


def key_path(address: Path) -> Path:
    return address.with_name(address.name + ".key")


def check_owned(path: Path) -> None:
    """DriverError unless `path` is this user's and not group- or world-writable (another
    user could stand in for the driver, or read what it is sent)."""
    info = path.stat()
    if info.st_uid != os.getuid():
        raise DriverError(f"refusing to call the driver: {path} belongs to uid {info.st_uid}, not to this user "
                          f"(uid {os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise DriverError(f"refusing to call the driver: {path} is group- or world-writable "
                          f"(mode {stat.S_IMODE(info.st_mode):o}); it must be 600")


def connect(address: Path):
    check_owned(address)
    check_owned(key_path(address))
    return Client(str(address), family="AF_UNIX", authkey=key_path(address).read_bytes())


def serving(address: Path) -> bool:
    """Whether a driver listens on `address` (a connection it drops at once, as a caller without the key)."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(address))
        except OSError:
            return False
    return True


def new_secret(path: Path) -> bytes:
    """32 random bytes, written to a new file of mode 0600 (FileExistsError if there is one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secret := secrets.token_bytes(32))
    return secret


def listen(address: Path) -> tuple[socket.socket, bytes]:
    """Listen on `address` with a fresh key (the listening socket and the key: callers prove
    it in `handshake`); refuse if another driver already listens there."""
    address.parent.mkdir(parents=True, exist_ok=True)
    if serving(address):
        raise DriverError(f"a driver already serves {address}")
    address.unlink(missing_ok=True)  # left by a driver that was killed
    key_path(address).unlink(missing_ok=True)
    authkey = new_secret(key_path(address))
    listener = socket.socket(socket.AF_UNIX)
    old_umask = os.umask(0o177)  # the socket file is created 0600
    try:
        listener.bind(str(address))
    finally:
        os.umask(old_umask)
    listener.listen(BACKLOG)
    return listener, authkey


def accept(listener: socket.socket) -> Connection:
    sock, _ = listener.accept()
    sock.setblocking(True)
    return Connection(sock.detach())


def handshake(conn, authkey: bytes) -> tuple:
    """The caller's call, once it proved it holds the key; each read of it waits
    DRIVER_HANDSHAKE_SECONDS at most (OSError), so that a silent caller is dropped."""
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:  # the same socket: its options are the connection's
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", DRIVER_HANDSHAKE_SECONDS, 0))
        deliver_challenge(conn, authkey)
        answer_challenge(conn, authkey)
        request = conn.recv()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    return request


@dataclass(frozen=True)
class Progress:
    """A line of a call's progress, sent before its reply when the caller asked for them."""
    text: str


def send(conn, reply: tuple | Progress) -> None:
    try:
        conn.send(reply)
    except OSError:
        pass  # the caller left; the work is done (or rolled back) all the same
