"""The driver's transport: a Unix socket of mode 0600 and a key file of mode 0600 beside it,
in folders no other user can write; each end checks that the other's process is this
user's (SO_PEERCRED), a caller proves it holds the key, then sends one call and reads one
reply."""

from __future__ import annotations

import errno
import os
import secrets
import socket
import stat
import struct
from dataclasses import dataclass
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
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


KINDS = {stat.S_IFSOCK: "socket", stat.S_IFREG: "file"}


def check_owned(info: os.stat_result, path: Path, kind: int) -> None:
    """DriverError unless `path` (`info`: its lstat or fstat) is of `kind` (a KINDS key: never
    a link), this user's and not group- or world-writable (another user could stand in for
    the driver, or read what it is sent)."""
    if stat.S_IFMT(info.st_mode) != kind:
        raise DriverError(f"refusing to call the driver: {path} is a link or not a {KINDS[kind]}")
    if info.st_uid != os.getuid():
        raise DriverError(f"refusing to call the driver: {path} belongs to uid {info.st_uid}, not to this user "
                          f"(uid {os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise DriverError(f"refusing to call the driver: {path} is group- or world-writable "
                          f"(mode {stat.S_IMODE(info.st_mode):o}); it must be 600")


def check_folder(info: os.stat_result, path: Path, own: bool) -> None:
    """DriverError unless the folder `path` is this user's or root's and no other user can
    write it; a root's sticky folder (/tmp) passes above the socket's `own` folder."""
    if info.st_uid not in (os.getuid(), 0):
        raise DriverError(f"the driver's socket folder {path} belongs to uid {info.st_uid}, neither this user "
                          "nor root")
    writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (own or info.st_uid != 0 or not info.st_mode & stat.S_ISVTX):
        raise DriverError(f"the driver's socket folder {path} is writable by other users (mode "
                          f"{stat.S_IMODE(info.st_mode):o}): one of them could stand in for the driver")


def open_folder(folder: Path) -> int:
    """An O_PATH descriptor of `folder` (links resolved first), each folder from / down to it
    checked (`check_folder`) and opened in the one checked before without following a link:
    the folder checked is the folder used. FileNotFoundError if there is none."""
    real = Path(os.path.realpath(folder))
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, part in enumerate(real.parts):
            if depth:
                try:
                    child = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    raise DriverError(f"the driver's socket folder {real}: {Path(*real.parts[:depth + 1])} "
                                      "became a link or is not a folder") from None
                os.close(fd)
                fd = child
            check_folder(os.fstat(fd), Path(*real.parts[:depth + 1]), own=depth == len(real.parts) - 1)
    except BaseException:
        os.close(fd)
        raise
    return fd


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def check_peer(credentials: tuple[int, int, int], who: str) -> None:
    """DriverError unless the process of `credentials` (`peer_credentials`) is this user's."""
    pid, uid, _ = credentials
    if uid != os.getuid():
        raise DriverError(f"refusing {who}: its process (pid {pid}) is uid {uid}'s, not this user's (uid {os.getuid()})")


def _read_key(folder: int, address: Path) -> bytes:
    """The key beside the socket, opened without following a link, checked on what was opened."""
    path = key_path(address)
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise DriverError(f"refusing to call the driver: {path} is a link") from None
    with os.fdopen(fd, "rb") as key:
        check_owned(os.fstat(fd), path, stat.S_IFREG)
        return key.read()


def connect(address: Path) -> Connection:
    """A connection to the driver at `address`, both ends proven: its folders, key and socket
    checked, the socket reached through the checked folder's descriptor (no path between
    check and connect), its process this user's, then the key's challenge both ways."""
    folder = open_folder(address.parent)
    try:
        authkey = _read_key(folder, address)
        check_owned(os.stat(address.name, dir_fd=folder, follow_symlinks=False), address, stat.S_IFSOCK)
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.connect(f"/proc/self/fd/{folder}/{address.name}")
            check_peer(peer_credentials(sock), "the driver")
        except BaseException:
            sock.close()
            raise
    finally:
        os.close(folder)
    conn = Connection(sock.detach())
    try:
        answer_challenge(conn, authkey)
        deliver_challenge(conn, authkey)
    except BaseException:
        conn.close()
        raise
    return conn


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
    os.close(open_folder(address.parent))  # a folder no other user can write
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
    """The next caller's connection; DriverError (it is dropped) if its process is another user's."""
    sock, _ = listener.accept()
    try:
        check_peer(peer_credentials(sock), "a caller")
    except DriverError:
        sock.close()
        raise
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
