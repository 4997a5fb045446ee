"""What CI (`.ci/run`, CORRELAKE_FORBID_SKIPS=1) holds the suite to besides no skips: the
whole suite collects no fewer tests than `collected_floor` (pyproject.toml), and an xfail
is strict (a test marked xfail that passes fails); and no test leaves the environment it
changed to the tests after it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from correlake.config import PROJECT_ROOT

SMALL = "tests/unit/test_ports.py"  # a few tests, collected fast


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
    assert pytest("-k", "refused", *whole, *floor, CORRELAKE_FORBID_SKIPS="1").returncode == 0  # counted before -k


def test_an_xfail_is_strict(pytestconfig):
    assert pytestconfig.getini("xfail_strict") is True


def _environment_writes(tree: ast.AST) -> list[int]:
    """The lines of `tree` that change os.environ but through pytest's MonkeyPatch."""
    def environ(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", "") == "os"

    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else (
            [node.target] if isinstance(node, ast.AugAssign) else [])
        if any(isinstance(t, ast.Subscript) and environ(t.value) for t in targets):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                environ(node.func.value) and node.func.attr in ("update", "pop", "popitem", "setdefault", "clear")
                or getattr(node.func.value, "id", "") == "os" and node.func.attr in ("putenv", "unsetenv")):
            lines.append(node.lineno)
    return lines


def test_fixtures_and_tests_change_the_environment_only_through_monkeypatch():
    """So that what they set is undone when they end (`monkeypatch`, `pytest.MonkeyPatch.context()`),
    not left to the tests after them and to the next tiers."""
    found = {str(path.relative_to(PROJECT_ROOT)): lines for path in sorted((PROJECT_ROOT / "tests").rglob("*.py"))
             if (lines := _environment_writes(ast.parse(path.read_text())))}
    assert found == {}
