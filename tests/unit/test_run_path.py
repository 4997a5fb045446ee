"""CORRELAKE_RUN_PATH: the path every run takes, checked before any work starts."""

from __future__ import annotations

import pytest

from correlake.config import RUN_PATHS, ConfigError, run_path, validate


def test_the_run_path_is_auto_by_default_and_one_of_three(monkeypatch):
    monkeypatch.delenv("CORRELAKE_RUN_PATH", raising=False)
    assert run_path() == "auto"
    for path in RUN_PATHS:
        monkeypatch.setenv("CORRELAKE_RUN_PATH", path)
        assert run_path() == path
    monkeypatch.setenv("CORRELAKE_RUN_PATH", "driver")
    with pytest.raises(ConfigError, match="CORRELAKE_RUN_PATH: 'driver' is not one of auto, small, spark"):
        validate()
