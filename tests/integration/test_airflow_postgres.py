"""Airflow on PostgreSQL metadata, the option beside SQLite: a throwaway PostgreSQL
server, `airflow db migrate` on it and `airflow dags test` of the DAG in a child
process, whose tasks run their stages on the test session's driver. Airflow records
the run in PostgreSQL; gold equals the CLI's."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from support.airflow_settings import AIRFLOW_BIN, airflow_env
from support.helpers import sorted_gold
from support.ports import free_port

from integration.test_airflow_dag import TASKS


def _postgres_bin() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return debian[-1].parent if debian else None


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server on a free port of 127.0.0.1 with an empty database `airflow`
    (trust auth, user airflow); its SQLAlchemy URL. Run as user postgres when we are root."""
    psycopg2 = pytest.importorskip("psycopg2")
    bin_dir = _postgres_bin()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        pytest.skip("PostgreSQL is not installed (.ci/run installs it)")
    root = Path(tempfile.mkdtemp(prefix="correlake-pg-"))  # not under pytest's 0700 folder: postgres must enter it
    as_owner = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = root / "data"
    subprocess.run([*as_owner, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "airflow", "-E", "UTF8",
                    "--no-sync"], check=True, capture_output=True)
    pg_ctl = [*as_owner, str(bin_dir / "pg_ctl"), "-D", str(data)]
    subprocess.run([*pg_ctl, "-l", str(root / "server.log"), "-w", "-o",
                    f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="airflow", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE airflow")
        conn.close()
        yield f"postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow"
    finally:
        subprocess.run([*pg_ctl, "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_the_dag_runs_with_its_metadata_in_postgresql(spark, postgres, served, small_demo, small_demo_gold, tmp_path):
    import psycopg2

    landing, lake, home = small_demo[0], tmp_path / "lake", tmp_path / "airflow_home"  # the landing: read only
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "CORRELAKE_DRIVER"}
    env.update({
        **airflow_env(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres,
        "AIRFLOW_VAR_CORRELAKE_LANDING": str(landing),
        "AIRFLOW_VAR_CORRELAKE_LAKE": str(lake),
        "CORRELAKE_DRIVER": str(served[0]),
    })
    for command in (["db", "migrate"], ["dags", "reserialize"], ["dags", "test", "correlake_hourly"]):
        start = time.perf_counter()
        done = subprocess.run([AIRFLOW_BIN, *command], env=env, capture_output=True, text=True, timeout=600)
        print(f"airflow {' '.join(command)}: {time.perf_counter() - start:.1f} s")
        assert done.returncode == 0, f"airflow {' '.join(command)}:\n{(done.stdout + done.stderr)[-4000:]}"

    with psycopg2.connect(postgres.replace("postgresql+psycopg2", "postgresql")) as conn, conn.cursor() as cur:
        cur.execute("SELECT run_id, state FROM dag_run WHERE dag_id = 'correlake_hourly'")
        (run_id, state), = cur.fetchall()
        cur.execute("SELECT task_id, state FROM task_instance WHERE run_id = %s", (run_id,))
        tasks = dict(cur.fetchall())
    assert state == "success"
    assert tasks == {task: "success" for task in TASKS}
    assert sorted_gold(str(lake)) == small_demo_gold
