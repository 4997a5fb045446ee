"""The driver's transport (driver/protocol.py) refuses what another local user could stand in
with: a socket folder, or a folder above it, that others can write; a key or socket that is
a link; a peer process of another uid (SO_PEERCRED, each end). A call goes through when all
is this user's. No Spark: a thread serves as `correlake serve` does (listen, accept, handshake)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from correlake.driver import protocol
from correlake.driver.protocol import DriverError

OTHER_UID = 54321  # no user of this machine


def serve_once(address: Path) -> threading.Thread:
    """A driver stand-in on `address` that answers one call with ("ok", the call)."""
    listener, authkey = protocol.listen(address)

    def one() -> None:
        with listener, protocol.accept(listener) as conn:
            try:
                request = protocol.handshake(conn, authkey)
            except (OSError, EOFError):  # let go without a call (the tests that refuse one)
                return
            protocol.send(conn, ("ok", request))

    thread = threading.Thread(target=one, daemon=True)
    thread.start()
    return thread


def call(address: Path) -> tuple:
    with protocol.connect(address) as conn:
        conn.send(("findings", ("lake",), {}, False))
        return conn.recv()


def test_a_call_goes_through_when_folders_key_socket_and_peer_are_this_users(tmp_path):
    address = tmp_path / "drivers" / "d.sock"
    thread = serve_once(address)
    assert call(address) == ("ok", ("findings", ("lake",), {}, False))
    thread.join(10)
    mine, theirs = socket.socketpair(socket.AF_UNIX)
    with mine, theirs:
        pid, uid, _ = protocol.peer_credentials(mine)
        assert (pid, uid) == (os.getpid(), os.getuid())
        protocol.check_peer(protocol.peer_credentials(mine), "the driver")


def test_a_peer_of_another_uid_is_refused_by_either_end():
    with pytest.raises(DriverError, match=f"refusing the driver: its process \\(pid 7\\) is uid {OTHER_UID}'s"):
        protocol.check_peer((7, OTHER_UID, OTHER_UID), "the driver")  # what `connect` checks of the server
    with pytest.raises(DriverError, match="refusing a caller"):
        protocol.check_peer((7, OTHER_UID, 0), "a caller")  # what `accept` checks of a caller


@pytest.mark.parametrize("writable", ["own", "parent"])
def test_a_socket_folder_others_can_write_is_refused(tmp_path, writable):
    folder = tmp_path / "parent" / "own"
    address = folder / "d.sock"
    thread = serve_once(address)  # a driver in a folder that was safe when it started
    (tmp_path / writable if writable == "parent" else folder).chmod(0o777)  # then opened to anyone
    with pytest.raises(DriverError, match=r"socket folder .* is writable by other users \(mode 777\)"):
        call(address)
    with pytest.raises(DriverError, match="is writable by other users"):
        protocol.listen(tmp_path / "parent" / "own" / "e.sock")  # nor does a driver serve there
    with socket.socket(socket.AF_UNIX) as stop:  # let the stand-in go
        stop.connect(str(address))
    thread.join(10)


def test_a_sticky_root_folder_above_is_fine_another_users_folder_is_not(tmp_path):
    sticky = tmp_path / "tmp"
    sticky.mkdir(mode=0o700)
    sticky.chmod(0o1777)  # as /tmp: others may add entries, not replace this user's
    (sticky / "mine").mkdir(mode=0o700)
    fd = protocol.open_folder(sticky / "mine")
    os.close(fd)
    if os.getuid() == 0 and sticky.stat().st_uid == 0:  # as root (CI), a folder of another user too
        os.chown(sticky / "mine", OTHER_UID, OTHER_UID)
        with pytest.raises(DriverError, match=f"belongs to uid {OTHER_UID}, neither this user nor root"):
            protocol.open_folder(sticky / "mine")


def test_a_key_or_socket_that_is_a_link_is_refused(tmp_path):
    address = tmp_path / "d.sock"
    thread = serve_once(address)
    real_key = protocol.key_path(address).rename(tmp_path / "elsewhere.key")
    protocol.key_path(address).symlink_to(real_key)
    with pytest.raises(DriverError, match=r"d\.sock\.key is a link"):
        call(address)
    protocol.key_path(address).unlink()
    real_key.rename(protocol.key_path(address))
    address.rename(tmp_path / "elsewhere.sock")
    address.symlink_to(tmp_path / "elsewhere.sock")
    with pytest.raises(DriverError, match=r"d\.sock is a link or not a socket"):
        call(address)
    with socket.socket(socket.AF_UNIX) as stop:
        stop.connect(str(tmp_path / "elsewhere.sock"))
    thread.join(10)


def test_a_socket_folder_that_is_a_link_to_a_folder_others_can_write_is_refused(tmp_path):
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(0o777)
    (tmp_path / "drivers").symlink_to(target)
    with pytest.raises(DriverError, match=f"socket folder {target} is writable by other users"):
        protocol.connect(tmp_path / "drivers" / "d.sock")
