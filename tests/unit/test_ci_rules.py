"""What CI (`.ci/run`, CORRELAKE_FORBID_SKIPS=1) holds the suite to besides no skips: the
whole suite collects no fewer tests than `collected_floor` (pyproject.toml), and an xfail
is strict (a test marked xfail that passes fails)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from correlake.config import PROJECT_ROOT

SMALL = "tests/unit/test_landing.py"  # a few tests, collected fast


def pytest(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def test_the_whole_suite_collecting_fewer_tests_than_the_floor_fails():
    whole = ("--collect-only", "-o", f"testpaths={SMALL}")  # the suite, as if it were that file alone
    short = pytest(*whole, "-o", "collected_floor=1000000", CORRELAKE_FORBID_SKIPS="1")
    said = re.search(r"collected (\d+) tests, fewer than the floor of 1000000 \(collected_floor in pyproject.toml\)",
                     short.stdout)
    assert short.returncode == 1 and said, short.stdout[-2000:]
    assert short.stdout.count("::test_") == int(said[1])  # every test, then the floor
    floor = ("-o", f"collected_floor={said[1]}")
    assert pytest(*whole, *floor, CORRELAKE_FORBID_SKIPS="1").returncode == 0
    assert pytest("-k", "links", *whole, *floor, CORRELAKE_FORBID_SKIPS="1").returncode == 0  # counted before -k


def test_an_xfail_is_strict(pytestconfig):
    assert pytestconfig.getini("xfail_strict") is True
