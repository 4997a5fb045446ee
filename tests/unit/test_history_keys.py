"""When a process may use the key columns of silver it cached from its last run of a lake
(`caches/history_keys.py`): only while that run's publish is the lake's last one and
silver's tables are at the versions it wrote. (The cached frames themselves are checked
against the lake's rows in tests/spark/test_pipeline_cases.py.)"""

from __future__ import annotations

import pytest

from correlake.caches import history_keys
from correlake.config import TABLES
from correlake.lake import journal
from correlake.transforms.scope import HistoryKeys

KEYS = HistoryKeys("messages", "events", None)  # stand-ins: the module never looks inside


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setattr(history_keys, "_entry", None)
    lake = str(tmp_path / "lake")
    journal.mark_published(lake, "run-1")
    return lake


VERSIONS = {name: -1 for name in TABLES}  # tables not there: the record says so too


def test_cached_keys_hold_for_the_lake_and_versions_their_run_published(lake, tmp_path):
    history_keys.store(lake, "run-1", KEYS)
    assert history_keys.cached(lake, VERSIONS) is KEYS
    assert history_keys.cached(lake, {**VERSIONS, "silver_workflow_events": 3}) is None  # another writer's commit
    assert history_keys.cached(str(tmp_path / "other"), VERSIONS) is None


def test_a_run_that_is_not_the_lakes_last_publish_keeps_nothing(lake):
    history_keys.store(lake, "run-0", KEYS)
    assert history_keys.cached(lake, VERSIONS) is None


def test_a_refresh_carries_them_over_and_any_other_record_ends_them(lake):
    history_keys.store(lake, "run-1", KEYS)
    before = journal.published(lake)
    journal.mark_published(lake, "run-2")  # a quiet hour's refresh: no silver table written
    history_keys.carry(lake, before, "run-2")
    assert history_keys.cached(lake, VERSIONS) is KEYS
    journal.mark_published(lake)  # a rollback, maintenance
    assert history_keys.cached(lake, VERSIONS) is None
    history_keys.carry(lake, before, "run-3")  # not over what was cached: nothing comes back
    assert history_keys.cached(lake, VERSIONS) is None


def test_a_driver_warm_up_leaves_what_is_cached(lake, tmp_path):
    history_keys.store(lake, "run-1", KEYS)
    with history_keys.set_aside():
        warm_up = str(tmp_path / "warm-up")
        journal.mark_published(warm_up, "warm-1")
        history_keys.store(warm_up, "warm-1", HistoryKeys("m", "e", None))
    assert history_keys.cached(lake, VERSIONS) is KEYS
