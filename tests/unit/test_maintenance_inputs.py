"""What maintenance and the Airflow DAGs accept: a VACUUM retention under Delta's 168 h
only with `correlake maintain --force`, Airflow Variables only in the allowed root
(CORRELAKE_ALLOWED_ROOT); what makes a table worth vacuuming. The DAGs' tasks themselves:
tests/integration/test_airflow_dag.py."""

from __future__ import annotations

import os
import time

import pytest

from correlake.config import ConfigError, allowed_roots, state_dir, validate
from correlake.errors import UsageError
from correlake.interfaces import cli
from correlake.lake import files, objectstore
from correlake.lake.preflight import check_retention, require_allowed


@pytest.mark.parametrize("hours", ["0", "1", "167.5"])
def test_maintain_refuses_a_retention_under_168_hours_without_force(tmp_path, capsys, hours):
    (tmp_path / "marker").write_text("x")
    assert cli.main(["maintain", "--lake", str(tmp_path), "--retain-hours", hours]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"correlake: a VACUUM retention of {float(hours):g} h is under Delta's 168 h")
    assert "add --force" in err and err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["marker"]  # nothing touched, no Spark started


def test_the_retention_rule():
    for hours, force in ((None, False), (168, False), (1000, False), (0, True), (167, True)):
        check_retention(hours, force, "hint")
    with pytest.raises(UsageError, match=r"retention of 0 h is under Delta's 168 h.*\(hint\)"):
        check_retention(0, False, "hint")


def test_the_allowed_root_is_correlake_home_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("CORRELAKE_ALLOWED_ROOT", raising=False)
    monkeypatch.setenv("CORRELAKE_HOME", str(tmp_path / "home"))
    assert allowed_roots() == [(tmp_path / "home").resolve()]
    require_allowed(state_dir() / "demo" / "landing", "Airflow Variable correlake_landing:")
    with pytest.raises(UsageError, match=f"Airflow Variable correlake_lake: /etc is outside the allowed root "
                                         f"{tmp_path}/home \\(CORRELAKE_ALLOWED_ROOT"):
        require_allowed("/etc", "Airflow Variable correlake_lake:")


def test_a_folder_outside_the_allowed_roots_is_refused_even_through_a_link(monkeypatch, tmp_path):
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        root.mkdir()
    monkeypatch.setenv("CORRELAKE_ALLOWED_ROOT", os.pathsep.join(map(str, roots)))
    (tmp_path / "a" / "out").symlink_to("/etc")
    for fine in ("a", "b/lake", "a/x/../landing"):
        require_allowed(tmp_path / fine, "v")
    for outside in ("a/out", "a/out/lake", "c", "a/../c", "/"):
        with pytest.raises(UsageError, match="is outside the allowed root"):
            require_allowed(tmp_path / outside, "v")


def test_the_allowed_root_setting_is_checked(monkeypatch):
    for bad in ("relative/path", ":", f"/ok{os.pathsep}rel"):
        monkeypatch.setenv("CORRELAKE_ALLOWED_ROOT", bad)
        with pytest.raises(ConfigError, match="CORRELAKE_ALLOWED_ROOT: .* is not absolute folder paths"):
            validate()


def test_a_table_is_worth_vacuuming_once_a_file_beside_its_log_is_older_than_the_retention(tmp_path, s3):
    """Maintenance vacuums a table only then (VACUUM deletes no younger file), in a folder
    and in object storage (where the store's clock dates an object: a cutoff ahead of it)."""
    table, now = tmp_path / "table", time.time()
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000.json").write_text("{}")
    os.utime(table / "_delta_log" / "00000.json", (now - 10 ** 6,) * 2)  # the log: never VACUUM's
    (table / "part-0.parquet").write_bytes(b"PAR1")
    assert not files.holds_older(str(table), now - 3600, "_delta_log")
    os.utime(table / "part-0.parquet", (now - 7200,) * 2)
    assert files.holds_older(str(table), now - 3600, "_delta_log")
    os.utime(table / "part-0.parquet", (now,) * 2)
    (table / "p=1").mkdir()  # an empty folder: VACUUM removes it
    assert files.holds_older(str(table), now - 3600, "_delta_log")

    lake = s3.fresh("lake")
    bucket, key = objectstore.split(f"{lake}/table/_delta_log/00000.json")
    objectstore.client().put_object(Bucket=bucket, Key=key, Body=b"{}")
    assert not files.holds_older(f"{lake}/table", time.time() + 3600, "_delta_log")
    objectstore.client().put_object(Bucket=bucket, Key=key.replace("_delta_log/00000.json", "part-0.parquet"),
                                    Body=b"PAR1")
    assert not files.holds_older(f"{lake}/table", time.time() - 3600, "_delta_log")
    assert files.holds_older(f"{lake}/table", time.time() + 3600, "_delta_log")
