"""CORRELAKE_RUN_PATH: the path every run takes, checked before any work starts; the backend
chosen from it and the run when the run is planned (`backends.choose`)."""

from __future__ import annotations

import pytest

from correlake.config import DRIVER_RUN_MAX_BYTES, RUN_PATHS, TABLES, ConfigError, run_path, validate
from correlake.lake.landing import LandingFile
from correlake.run.backends import choose
from correlake.run.result import RunResult
from correlake.run.store import Plan


def test_the_run_path_is_auto_by_default_and_one_of_three(monkeypatch):
    monkeypatch.delenv("CORRELAKE_RUN_PATH", raising=False)
    assert run_path() == "auto"
    for path in RUN_PATHS:
        monkeypatch.setenv("CORRELAKE_RUN_PATH", path)
        assert run_path() == path
    monkeypatch.setenv("CORRELAKE_RUN_PATH", "small")  # the driver backend's name before 2026-12-05
    with pytest.raises(ConfigError, match="CORRELAKE_RUN_PATH: 'small' is not one of auto, driver, spark"):
        validate()


def plan_of(json_bytes: int, path: str = "auto", rebuild: bool = False, key_groups: int = 0) -> Plan:
    """A run's plan of one new file of `json_bytes`, on a lake of every table at version 0
    (`key_groups`: its key group table's version, -1: none)."""
    files = [LandingFile("messages", "/l/messages/a.jsonl", json_bytes, 0, "/l")]
    versions = dict.fromkeys(TABLES, 0) | {"key_groups": key_groups}
    return Plan("r", files, versions, 0.0, None, RunResult("r", rebuild=rebuild), path=path)


def test_the_backend_is_chosen_once_from_the_run_and_the_setting():
    assert choose(plan_of(DRIVER_RUN_MAX_BYTES)) == "driver"
    assert choose(plan_of(DRIVER_RUN_MAX_BYTES + 1)) == "spark"
    assert choose(plan_of(10, rebuild=True)) == "spark"
    assert choose(plan_of(DRIVER_RUN_MAX_BYTES + 1, path="driver")) == "driver"
    assert choose(plan_of(10, path="spark")) == "spark"
    assert choose(plan_of(10, path="driver", key_groups=-1)) == "spark"  # a lake from before the key group table
    assert Plan.from_json(plan_of(10).to_json()).backend == "spark"  # as the plan names it: the default
    planned = plan_of(10)
    planned.backend = choose(planned)
    assert Plan.from_json(planned.to_json()).backend == "driver"  # saved with the plan
