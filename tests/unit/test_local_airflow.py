"""`make airflow`'s set-up (`correlake.interfaces.airflow_local`): AIRFLOW_HOME private
(0700), the admin's password file created 0600 before its content is written, the
password shown at the first start only, and the signing keys Airflow reads from 0600 files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from correlake.interfaces import airflow_local


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_airflow_home_is_created_private_and_an_open_one_made_so(tmp_path):
    old = os.umask(0)
    try:
        airflow_local.private_home(tmp_path / ".local" / "airflow")
    finally:
        os.umask(old)
    assert mode(tmp_path / ".local" / "airflow") == 0o700
    (tmp_path / "open").mkdir(mode=0o755)
    airflow_local.private_home(tmp_path / "open")
    assert mode(tmp_path / "open") == 0o700


def test_the_password_file_is_0600_from_its_creation_and_the_password_shown_once(tmp_path, monkeypatch):
    """With umask 0 and no chmod allowed, only a file created 0600 ends 0600: its content
    was never in a file others could read."""
    passwords = tmp_path / "passwords.json"
    forbidden = []
    monkeypatch.setattr(os, "chmod", lambda *a, **k: forbidden.append(a))
    monkeypatch.setattr(Path, "chmod", lambda *a, **k: forbidden.append(a))
    old = os.umask(0)
    try:
        first = airflow_local.login(passwords)
    finally:
        os.umask(old)
    monkeypatch.undo()
    password = json.loads(passwords.read_text())["admin"]
    assert forbidden == [] and mode(passwords) == 0o600
    assert first.startswith(f"admin / {password}") and "shown this once" in first
    assert [p.name for p in tmp_path.iterdir()] == ["passwords.json"]  # no temporary file left

    second = airflow_local.login(passwords)
    assert password not in second and second == f"admin, password in {passwords} (shown at the first start only)"
    assert json.loads(passwords.read_text()) == {"admin": password}


def test_a_password_file_of_an_older_launcher_is_kept_and_made_0600(tmp_path):
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "old-secret", "viewer": "v"}))
    passwords.chmod(0o644)
    assert "old-secret" not in airflow_local.login(passwords)
    assert mode(passwords) == 0o600 and json.loads(passwords.read_text())["admin"] == "old-secret"

    passwords.write_text(json.dumps({"viewer": "v"}))  # no admin yet: one is added, the others kept
    assert "shown this once" in airflow_local.login(passwords)
    assert set(json.loads(passwords.read_text())) == {"viewer", "admin"} and mode(passwords) == 0o600


def test_the_signing_keys_are_64_random_bytes_made_once_in_0600_files_that_airflow_reads(tmp_path):
    """Airflow's own keys are 16 bytes (PyJWT warns below 64 for HS512); these replace them
    through `_CMD` settings, so no key is in a process's environment."""
    old = os.umask(0)
    try:
        settings = airflow_local.signing_keys(tmp_path)
    finally:
        os.umask(old)
    files = {name: tmp_path / "keys" / name for name in airflow_local.SIGNING_KEYS.values()}
    assert mode(tmp_path / "keys") == 0o700 and all(mode(f) == 0o600 for f in files.values())
    keys = {name: f.read_text() for name, f in files.items()}
    assert all(len(bytes.fromhex(k)) == airflow_local.KEY_BYTES for k in keys.values())
    assert len(set(keys.values())) == 2
    (tmp_path / "keys").chmod(0o755)
    assert airflow_local.signing_keys(tmp_path) == settings  # made once, kept
    assert mode(tmp_path / "keys") == 0o700
    assert {name: f.read_text() for name, f in files.items()} == keys
    assert not any(k in value for value in settings.values() for k in keys.values())

    read = ("from airflow.configuration import conf; "
            "print(conf.get('api', 'secret_key')); print(conf.get('api_auth', 'jwt_secret'))")
    env = {**os.environ, **settings, "AIRFLOW_HOME": str(tmp_path / "airflow")}  # Airflow in a process of its own
    shown = subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True, check=True)
    assert shown.stdout.split() == [keys["api_secret_key"], keys["jwt_secret"]]


def test_make_airflow_prints_a_line_when_a_dag_run_ends():
    from correlake.interfaces.airflow_local import _RUN_ENDED

    line = ("[2026-12-03T06:00:05.123+0000] {dagrun.py:1249} INFO - Marking run <DagRun correlake_hourly @ "
            "2026-12-03 06:00:00+00:00: scheduled__2026-12-03T06:00:00+00:00, state:running, queued_at: "
            "2026-12-03 06:00:01+00:00. run_type: scheduled> successful")
    found = _RUN_ENDED.search(line)
    assert (found["dag"], found["run"], found["state"]) == (
        "correlake_hourly", "scheduled__2026-12-03T06:00:00+00:00", "successful")
    manual = "Marking run <DagRun correlake_hourly @ None: manual__2026-12-03T06:10:00+00:00, state:running, " \
             "queued_at: None. run_type: manual> failed"
    assert _RUN_ENDED.search(manual)["state"] == "failed"
