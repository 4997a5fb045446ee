"""The pipeline on a real Spark standalone cluster (conftest's `spark_cluster`: a master and
two 1-core workers, each its own JVM, on 127.0.0.1).

A long-lived driver (`correlake serve`) runs with CORRELAKE_SPARK_MASTER=spark://…, and
`correlake run` processes call it. Its executors' Python has the dependencies but not
correlake: the package reaches them only as the driver sends it (session.ship_package),
and the Delta JARs as `spark.jars`. Both executors run tasks, the mapInArrow passes'
Python among them; over a generated landing that grows between two runs, the runs give
the reference model's gold.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cluster import private_env, python_without_correlake
from support.generators import SEED, START_EVENTS, combine, generate_cases, shuffled_chunks
from support.helpers import assert_gold_equals, read_gold, write_landing
from support.reference_model import reference

from correlake.driver import launch

CORRELAKE = str(Path(sys.executable).with_name("correlake"))


@pytest.fixture(scope="module")
def cluster_driver(spark_cluster, tmp_path_factory):
    """A `correlake serve` whose Spark application runs on the cluster: (socket, cluster,
    application id). Stopped at the end, the application is then a finished one."""
    root = tmp_path_factory.mktemp("cluster_driver")
    env = {**private_env(root / "tmp"), "CORRELAKE_SPARK_MASTER": spark_cluster.url,
           "PYSPARK_PYTHON": str(python_without_correlake(root / "python")), "CORRELAKE_DRIVER_MEMORY": "1g"}
    socket, log = root / "driver.sock", root / "driver.log"
    process = launch.spawn(socket, log, warm_up_rounds=0, env=env, timeout=180)
    try:
        [app] = [a["id"] for a in spark_cluster.state()["activeapps"] if a["name"] == "correlake"]
        yield socket, spark_cluster, app
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()[-3000:]
    deadline = time.monotonic() + 30  # the master hears of the driver's end a little later
    while not (done := [a for a in spark_cluster.state()["completedapps"] if a["id"] == app]):
        assert time.monotonic() < deadline, spark_cluster.state()
        time.sleep(0.5)
    assert done[0]["state"] == "FINISHED" and done[0]["cores"] == 2, done


def run_on(socket: Path, landing: Path, lake: Path) -> str:
    """`correlake run` on the driver of `socket`, on Spark's path: its output."""
    done = subprocess.run([CORRELAKE, "run", "--landing", str(landing), "--lake", str(lake)],
                          env={**os.environ, "CORRELAKE_DRIVER": str(socket), "CORRELAKE_RUN_PATH": "spark"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def executor_logs(cluster, app: str) -> list[str]:
    """Each worker's executors' logs of application `app`, once each has the package's zip."""
    logs = []
    for n in (1, 2):
        [executor] = cluster.work_dir(n).glob(f"{app}/*")  # one executor per worker: its folder
        assert (executor / "correlake.zip").is_file(), cluster.log_tail()
        logs.append((executor / "stderr").read_text(errors="replace"))
    return logs


def test_runs_on_the_cluster_of_a_growing_landing_give_the_reference_gold(spark, cluster_driver, tmp_path):
    """On Spark's path, forced (the runs are small): the engine runs in the executors' Python."""
    socket, cluster, app = cluster_driver
    messages, events = combine(generate_cases(30) + generate_cases(10, START_EVENTS))
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    chunks = shuffled_chunks(messages, events, random.Random(SEED), 2)
    for n, (chunk_messages, chunk_events) in enumerate(chunks):  # a second run reads the files added since
        write_landing(landing, chunk_messages, chunk_events, name=f"part{n}")
        out = run_on(socket, landing, lake)
        assert "bronze   files 2," in out and "path spark" in out, out
    assert_gold_equals(read_gold(str(lake)), reference(messages, events))
    logs = executor_logs(cluster, app)
    assert all("Finished task" in log for log in logs), cluster.log_tail()  # both executors worked
    # the Python of the mapInArrow passes (landing lines parsed, the engine) ran there, from the zip
    assert any("MapInBatchEvaluator" in log and "Starting Python task" in log for log in logs)
