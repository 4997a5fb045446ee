"""The real Airflow API server on a free port: the DAG is listed, runs are triggered
with validated params through the REST API v2, and the UI shows a successful run
(scripts/airflow_screenshot.py in headless Chromium). The log server `make airflow` starts
in place of Airflow's (correlake.interfaces.airflow_log_server) listens on loopback alone
and serves the API server's signed requests for a task's and a trigger's log."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
from support.airflow_settings import AIRFLOW_BIN, AIRFLOW_PASSWORD
from support.helpers import listening_addresses
from support.ports import free_port

from correlake.interfaces import airflow_log_server
from integration.test_airflow_dag import TASKS

ROOT = Path(__file__).resolve().parents[2]
DAG = "correlake_hourly"


@pytest.fixture(scope="module")
def api_server(airflow_home):
    """`airflow api-server` on a free port of 127.0.0.1; its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(airflow_home / "api-server.log", "wb")
    server = subprocess.Popen([AIRFLOW_BIN, "api-server", "-H", "127.0.0.1",
                               "-p", str(port)], env={**os.environ, "AIRFLOW__API__BASE_URL": url},
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, (airflow_home / "api-server.log").read_text()[-3000:]
            try:
                if requests.get(f"{url}/api/v2/monitor/health", timeout=5).ok:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "API server not up after 180 s"
            time.sleep(1)
        yield url
    finally:
        server.terminate()
        server.wait(30)
        log.close()


@pytest.fixture(scope="module")
def rest(api_server):
    """A requests session logged in with a JWT from POST /auth/token."""
    response = requests.post(f"{api_server}/auth/token", json={"username": "admin", "password": AIRFLOW_PASSWORD},
                             timeout=30)
    assert response.status_code == 201, response.text
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {response.json()['access_token']}"
    return lambda method, path, **kw: session.request(method, f"{api_server}/api/v2{path}", timeout=30, **kw)


def test_the_dag_is_listed_and_runs_are_triggered_with_validated_params(rest):
    dags = rest("GET", "/dags", params={"dag_id_pattern": "correlake"}).json()["dags"]
    assert [(d["dag_id"], d["timetable_summary"], d["max_active_runs"]) for d in dags
            if d["dag_id"] != "correlake_delivery"] == [(DAG, "0 * * * *", 1), ("correlake_maintenance", "30 3 * * *", 1)]
    assert "correlake_delivery" in {d["dag_id"] for d in dags}
    assert sorted(t["task_id"] for t in rest("GET", f"/dags/{DAG}/tasks").json()["tasks"]) == sorted(TASKS)

    conf = {"as_of": "2026-11-02T12:00:00+01:00", "rebuild": False, "max_quarantine_ratio": 0.2, "dry_run": True}
    created = rest("POST", f"/dags/{DAG}/dagRuns", json={"logical_date": None, "conf": conf})
    assert created.status_code == 200, created.text
    run_id = created.json()["dag_run_id"]
    try:
        run = rest("GET", f"/dags/{DAG}/dagRuns/{run_id}").json()
        assert (run["run_type"], run["triggered_by"], run["conf"]) == ("manual", "rest_api", conf)
    finally:
        assert rest("DELETE", f"/dags/{DAG}/dagRuns/{run_id}").status_code == 204

    for bad in ({"max_quarantine_ratio": 1.5}, {"as_of": "2026-11-02T12:00:00"}, {"dry_run": "yes"}):
        refused = rest("POST", f"/dags/{DAG}/dagRuns", json={"logical_date": None, "conf": bad})
        assert refused.status_code == 400 and next(iter(bad)) in refused.text, refused.text


def test_the_ui_shows_the_successful_run_with_every_task(api_server, airflow_run, tmp_path):
    run, _, _ = airflow_run
    png = tmp_path / "correlake_hourly.png"
    shot = subprocess.run([sys.executable, str(ROOT / "scripts" / "airflow_screenshot.py"), "--url", api_server,
                           "--password", AIRFLOW_PASSWORD, "--run", run.run_id, "--out", str(png)],
                          capture_output=True, text=True, timeout=300)
    assert shot.returncode == 0, shot.stdout + shot.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_the_log_server_listens_on_loopback_only_and_serves_the_api_servers_requests(airflow_home, monkeypatch):
    """As under `make airflow`: one port for the workers' and the triggerer's logs, and the
    components' hostname that of the log server. The URLs and signed requests are Airflow's own
    (its FileTaskHandler, as the API server asks for a running or deferred task's log)."""
    from airflow.utils.log.file_task_handler import FileTaskHandler, LogType, _fetch_logs_from_service

    port = free_port()
    for key in ("WORKER_LOG_SERVER_PORT", "TRIGGER_LOG_SERVER_PORT"):
        monkeypatch.setenv(f"AIRFLOW__LOGGING__{key}", str(port))
    task_log = Path("dag_id=probe/run_id=manual/task_id=t/attempt=1.log")
    trigger_log = Path(FileTaskHandler.add_triggerer_suffix(str(task_log), job_id=7))
    for path, text in ((task_log, "the task's line\n"), (trigger_log, "the trigger's line\n")):
        (airflow_home / "logs" / path).parent.mkdir(parents=True, exist_ok=True)
        (airflow_home / "logs" / path).write_text(text)

    server = subprocess.Popen([sys.executable, "-m", "correlake.interfaces.airflow_log_server"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not listening_addresses(server.pid):
            assert server.poll() is None, server.communicate()[0]
            assert time.monotonic() < deadline, "the log server does not listen after 60 s"
            time.sleep(0.2)
        listening = listening_addresses(server.pid)
        assert [str(ip) for ip in listening] == [airflow_log_server.LOOPBACK], listening

        host = airflow_log_server.hostname()
        ti = SimpleNamespace(hostname=host, triggerer_job=SimpleNamespace(hostname=host, id=7))
        handler = FileTaskHandler(base_log_folder=str(airflow_home / "logs"))
        for log_type, text in ((LogType.WORKER, "the task's line\n"), (LogType.TRIGGER, "the trigger's line\n")):
            url, relative = handler._get_log_retrieval_url(ti, str(task_log), log_type=log_type)
            assert url.startswith(f"http://127.0.0.1:{port}/log/")
            response = _fetch_logs_from_service(url, relative)
            assert (response.status_code, response.text) == (200, text)
            assert requests.get(url, timeout=10).status_code == 403  # unsigned: refused
    finally:
        server.terminate()
        server.wait(30)
