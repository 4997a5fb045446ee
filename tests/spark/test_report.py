"""`correlake report` on a real demo lake: a self-contained page that agrees with gold,
whose charts headless Chromium draws (its DOM, and screenshots with and without marks)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from correlake.config import table_path
from correlake.interfaces import cli

# activity, latency, backlog, unmatched by name and by key, lock waits, closed subscriptions, quarantine,
# delivery statuses (the demo lake's correlations were delivered: conftest.demo_run)
CHARTS = 11  # the "why not correlated" card draws two


@pytest.fixture(scope="module")
def report(spark, demo_lake, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert cli.main(["report", "--lake", demo_lake, "--out", str(out)]) == 0
    return out


def test_report_is_self_contained_and_agrees_with_gold(spark, demo_lake, report):
    html = report.read_text()
    assert not re.search(r"<script|<link|<img|<iframe|url\(|https?://", html, re.IGNORECASE)
    assert html.count("<svg") == CHARTS and "no data" not in html
    messages = spark.read.format("delta").load(table_path(demo_lake, "messages")).count()
    correlations = spark.read.format("delta").load(table_path(demo_lake, "correlations")).count()
    assert f"<b>{messages:,}</b><span>messages</span>" in html
    assert f"<b>{correlations:,}</b><span>correlations</span>" in html
    for gate in ("quarantine ratio", "bronze", "silver", "gold"):
        assert re.search(rf"<td>{gate}</td><td>[^<]*</td><td>passed</td>", html), gate
    assert "missing field name" in html and "STARTED" in html
    assert re.search(r"lines quarantined \([0-9.]+%\); at most [0-9.]+% allowed", html)  # the run's own limit
    explained = spark.sql("SELECT kind, reason, count(*) AS n FROM explanations GROUP BY ALL").collect()
    for r in explained:  # the reasons' bars: one per kind and reason, as many as the view has
        assert f"{r['kind']} · {r['reason']}: {r['n']:,}</title>" in html


def _chromium(*args: str) -> str:
    result = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_draws_every_chart(report, tmp_path):
    dom = _chromium("--dump-dom", report.as_uri())
    svgs = dom.split("<svg")[1:]
    assert len(svgs) == CHARTS
    assert all(svg.split("</svg>")[0].count('class="mark"') >= 2 for svg in svgs)

    hidden = tmp_path / "hidden.html"  # the same page with every mark hidden
    hidden.write_text(report.read_text().replace("</head>", "<style>.mark { visibility: hidden }</style></head>"))
    shots = {}
    for name, page in (("report", report), ("hidden", hidden)):
        shots[name] = tmp_path / f"{name}.png"
        _chromium("--window-size=1200,2400", f"--screenshot={shots[name]}", page.as_uri())
    png = shots["report"].read_bytes()
    assert png.startswith(b"\x89PNG") and int.from_bytes(png[16:20], "big") == 1200
    assert len(png) > 50_000 and png != shots["hidden"].read_bytes()


def test_a_lake_of_quarantine_only_has_a_report_and_a_folder_is_no_out_file(spark, tmp_path, capsys):
    from support.helpers import write_jsonl

    from correlake.run import pipeline

    landing, lake = tmp_path / "landing", str(tmp_path / "lake")
    write_jsonl(landing / "messages" / "bad.jsonl", ['{"position": 1, "name": ', "not json"])
    pipeline.run(spark, str(landing), lake, max_quarantine_ratio=1.0)  # gold's tables exist, empty
    out = tmp_path / "report.html"
    assert cli.main(["report", "--lake", lake, "--out", str(out)]) == 0  # was a crash on the missing as_of
    html = out.read_text()
    assert "statuses as of - UTC" in html and "<b>0</b><span>messages</span>" in html
    assert "invalid JSON: Expecting value" in html and "line 1 column" not in html  # both lines in one bar: their kind
    with pytest.raises(SystemExit) as exit_:
        cli.main(["report", "--lake", lake, "--out", str(tmp_path)])
    assert exit_.value.code == 2 and f"{tmp_path} is a folder: name a file" in capsys.readouterr().err
