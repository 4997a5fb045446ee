"""A throwaway Spark standalone cluster for the tests, from the installed PySpark: a master
and workers, each its own JVM, on 127.0.0.1 and free ports, every folder they write in
their own root; and a Python for their executors that has the dependencies but not
correlake (which the driver must send them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pyspark

from .ports import free_port

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def python_without_correlake(root: Path) -> Path:
    """A virtual environment in `root` that sees this one's packages (a `.pth` line adds its
    site-packages, whose own `.pth` files, correlake's editable install among them, are not
    read) but not correlake: the Python of workers where nothing of the project is installed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (root / "lib" / version / "site-packages" / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = root / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import importlib.util, pyarrow, pyspark\n"
                            "assert importlib.util.find_spec('correlake') is None, 'correlake importable'"],
                           env=without_python_path(private_env(root)), capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    return python


def private_env(tmp: Path) -> dict[str, str]:
    """This process's environment less its Spark settings, with every temporary file (the
    JVM's, Spark's local folders, Python's) in `tmp` and Spark's addresses on 127.0.0.1."""
    tmp.mkdir(parents=True, exist_ok=True)
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))},
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(tmp), "TMPDIR": str(tmp),
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp} -XX:-UsePerfData"}


def without_python_path(env: dict[str, str]) -> dict[str, str]:
    """`env` less PYTHONPATH (the tests' may name the project's package)."""
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}


class SparkCluster:
    """A master and `workers` workers (`cores` cores, `memory` each) in `root`. `start()`
    waits until every worker has registered; `stop()` stops them; `state()` is the master's
    JSON (workers, active and completed applications); `log_tail()` their logs' ends."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1500m"):
        self.root, self.workers, self.cores, self.memory = root, workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}

    def work_dir(self, n: int) -> Path:
        return self.root / f"worker{n}" / "work"

    def _spawn(self, name: str, *args: str) -> None:
        """Start a daemon (its executors, and their Python workers, get its environment)."""
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "out.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                [str(SPARK_CLASS), *args], env=without_python_path(private_env(folder / "tmp")),
                stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True)

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            return json.load(response)

    def start(self, timeout: float = 90) -> None:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for n in range(1, self.workers + 1):
            self._spawn(f"worker{n}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                        "--work-dir", str(self.work_dir(n)))
        deadline = time.monotonic() + timeout
        while True:
            try:
                if sum(w["state"] == "ALIVE" for w in self.state()["workers"]) == self.workers:
                    return
            except (OSError, ValueError):  # the master's web UI is not up yet (no answer, or an empty one)
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes.values()):
                raise RuntimeError(f"the Spark cluster did not start:\n{self.log_tail()}")
            time.sleep(0.5)

    def stop(self) -> None:
        for process in reversed(self.processes.values()):  # the workers (and their executors) first
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(30)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
                         for log in sorted(self.root.glob("*/out.log")))
