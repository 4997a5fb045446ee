"""scripts/connect_compare.py's pure parts: its arguments and the table it writes (the
harness itself, which starts a Spark Connect server and a kept driver, is not run by CI)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "connect_compare.py"
spec = importlib.util.spec_from_file_location("connect_compare", SCRIPT)
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def test_arguments_default_to_the_issues_workload():
    args = compare.parse_args([])
    assert (args.messages, args.events, args.increment, args.pairs, args.idle) == (20_000, 20_000, 0.01, 10, 30.0)
    assert compare.parse_args(["--turns", "5", "--out", "/x"]).turns == 5


def _timed(seconds: float, rc: int = 0, tail: str = "") -> dict:
    return {"s": seconds, "rc": rc, "load": 3.0, "tail": tail, "path": None}


def test_the_table_gives_each_command_both_sides_and_their_ratio():
    both = {"kept": _timed(10.0), "connect": _timed(20.0)}
    refused = "correlake: [JVM_ATTRIBUTE_NOT_SUPPORTED] …"
    turn = {"turn": 1, "hour": both, "micro": both, "report": both, "explain": both, "gold_equal": True,
            "micro_gold_equal": False, "sql": {"kept": _timed(4.0), "connect": _timed(5.0, 2, refused)},
            "sql_unguarded_connect": _timed(3.0)}
    report = {"workload": {"messages": "20000", "events": "20000", "increment": "0.01", "pairs": "10", "idle": "30"},
              "first_run": {"kept": _timed(50.0), "connect": _timed(40.0)}, "first_gold_equal": True,
              "turns": [turn], "lines": {"driver/": 877},
              "at_rest": {"kept": {"resident_mib": [300.0, 1800.0], "cpu_s": [0.0, 0.1]}}}
    text = compare.markdown(report)
    assert "| - | first run | 50.0 (load 3) | 40.0 (load 3) | 0.80 | True |" in text
    assert "| 1 | hour | 10.0 (load 3) | 20.0 (load 3) | 2.00 | True |" in text
    assert "| 1 | micro | 10.0 (load 3) | 20.0 (load 3) | 2.00 | False |" in text
    assert "| 1 | sql | 4.0 (load 3) | 5.0 (load 3), exit 2 | 1.25 |  |" in text
    assert f"`correlake sql` over Connect: {refused}" in text
    assert "- at rest, kept: resident MiB [300.0, 1800.0] (process, JVM)" in text
    assert "- lines, driver/: 877" in text
