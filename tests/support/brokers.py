"""A throwaway RabbitMQ node for the tests (Debian's rabbitmq-server, run as the current user):
its own node name, ports, data folder and Erlang port mapper, all on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from .ports import free_port

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")  # not /usr/sbin's wrappers: they switch to user rabbitmq


def rabbitmq_installed() -> bool:
    return (RABBITMQ_BIN / "rabbitmq-server").exists() and shutil.which("erl") is not None


class RabbitNode:
    """One broker node in `root`. `start()` waits until it serves AMQP; `kill()` SIGKILLs its
    Erlang VM; `restart()` starts it again on the same data folder and ports; `stop()` stops it
    and its port mapper; `save_queue_registry()` saves its quorum queues' registry on disk.
    `max_message_size` (bytes) is the broker's limit on a message body."""

    def __init__(self, root: Path, *, max_message_size: int = 1 << 20):
        self.root = root
        self.name = f"correlake-test-{uuid.uuid4().hex[:8]}@localhost"
        self.port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        for folder in ("mnesia", "log", "home"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        (root / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n"
            f"max_message_size = {max_message_size}\n")
        (root / "enabled_plugins").write_text("[].\n")
        loopback = "-kernel inet_dist_use_interface {127,0,0,1}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))},
            "HOME": str(root / "home"),  # the Erlang cookie: the node and rabbitmqctl share it
            "RABBITMQ_NODENAME": self.name, "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(root / "mnesia"), "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq"), "RABBITMQ_PID_FILE": str(root / "pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": loopback, "RABBITMQ_CTL_ERL_ARGS": loopback,
            "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(self.epmd_port),  # a port mapper of its own
        }
        self.process: subprocess.Popen | None = None

    def ctl(self, *args: str, tool: str = "rabbitmqctl", timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(RABBITMQ_BIN / tool), "-n", self.name, *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, timeout: float = 90) -> None:
        log = open(self.root / "log" / "server.out", "ab")
        self.process = subprocess.Popen([str(RABBITMQ_BIN / "rabbitmq-server")], env=self.env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root)
        log.close()
        deadline = time.monotonic() + timeout
        while self.ctl("-q", "ping", tool="rabbitmq-diagnostics", timeout=30).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"RabbitMQ did not start:\n{self.log_tail()}")
            time.sleep(0.5)
        done = self.ctl("await_startup", timeout=max(1.0, deadline - time.monotonic()))
        if done.returncode != 0:
            raise RuntimeError(f"RabbitMQ did not finish booting: {done.stderr}\n{self.log_tail()}")

    def save_queue_registry(self) -> None:
        """Write the quorum queues' Ra directory (queue name -> data folder, `names.dets`) to disk
        now: RabbitMQ 3.10 saves it every 0.5 s only, and a node killed before a queue declared
        since is in it restarts that queue as a new, empty member that never elects a leader (its
        confirmed messages gone); a queue of a name deleted and declared again since, from the
        deleted one's folder, which fails (`could not be restarted {error,enoent}`)."""
        done = self.ctl("eval", "dets:sync(maps:get(directory_rev, maps:get(names, ra_system:fetch(quorum_queues)))).")
        if done.returncode != 0 or done.stdout.strip() != "ok":
            raise RuntimeError(f"could not save the quorum queues' registry: {done.stdout}{done.stderr}")

    def beam_pid(self) -> int:
        return int((self.root / "pid").read_text().strip())

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the node's Erlang VM (a crash: nothing flushed, no goodbye to clients)."""
        os.kill(self.beam_pid(), signal.SIGKILL)
        self.process.wait(30)

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.ctl("stop", timeout=60)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:  # its own session: the group is the node's wrapper and VM
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        subprocess.run(["epmd", "-kill"], env=self.env, capture_output=True)  # ours: ERL_EPMD_PORT

    def log_tail(self, lines: int = 40) -> str:
        text = "".join(p.read_text(errors="replace") for p in sorted((self.root / "log").glob("*")) if p.is_file())
        return "\n".join(text.splitlines()[-lines:])
