"""Runs that find the landing's new files from each stream's mark (`lake/discovery.py`), on
one lake: a file written below the mark is not found by the runs within the full-listing
interval and is by the first full listing after it; a file at the mark that grew has its
new lines read once; a run that fails after listing leaves the marks where they were."""

from __future__ import annotations

import json

import pytest
from support.helpers import opened, publish, write_jsonl
from support.lake_rows import table_rows

from correlake.lake import discovery, files, meta
from correlake.quality.gates import GateFailed
from correlake.run import pipeline

T0 = 1_790_000_000_000
DAY = 24 * 3600 * 1000


@pytest.fixture(autouse=True)
def ordered_landing(monkeypatch):
    """The landings here declared lexically ordered, a full listing every 24 h (config.full_listing_seconds)."""
    monkeypatch.setenv("CORRELAKE_FULL_LISTING_HOURS", "24")


def record(lake: str) -> dict:
    return json.loads(files.state(lake).read(discovery.RECORD))


def positions(lake: str) -> list[int]:
    """bronze/messages' positions, read with delta-rs."""
    return sorted(r["position"] for r in table_rows(lake, "bronze_messages", lambda _: ["position"]))


def test_a_file_below_the_mark_waits_for_the_full_listing_a_grown_one_is_read_once_a_failed_run_moves_nothing(
        spark, tmp_path):
    landing, lake = tmp_path / "landing", str(tmp_path / "lake")
    write_jsonl(landing / "messages/2026-12-04/10/a.jsonl", [publish(1, "k1", T0)])
    write_jsonl(landing / "workflow_events/2026-12-04/10/w.jsonl", [opened(1, "k1", T0 - 1000)])
    assert pipeline.run(spark, str(landing), lake).files == 2  # the first run: a full listing
    listed_at = record(lake)["full_listed_at"]
    late = write_jsonl(landing / "messages/2026-12-04/09/late.jsonl", [publish(2, "k2", T0 + 1)])  # out of order
    b = write_jsonl(landing / "messages/2026-12-04/11/b.jsonl", [publish(3, "k3", T0 + 2)])
    assert pipeline.run(spark, str(landing), lake).files == 1  # b only: late is below the mark
    assert str(late) not in {path for path, _, _ in meta.ingested(lake)}

    with open(b, "a") as grown:  # b, the mark now, grows
        grown.write(json.dumps(publish(4, "k4", T0 + 3)) + "\n")
    c = write_jsonl(landing / "messages/2026-12-04/12/c.jsonl", [publish(5, "k5", T0 + 4), "{not json"])
    before = record(lake)
    with pytest.raises(GateFailed):  # fails after listing: its bronze gate
        pipeline.run(spark, str(landing), lake, max_quarantine_ratio=0.0)
    assert record(lake) == before
    result = pipeline.run(spark, str(landing), lake, max_quarantine_ratio=1.0)
    assert (result.files, result.records_read, result.quarantined_total) == (2, 3, 1)  # b's new line, c's two
    assert positions(lake) == [1, 3, 4, 5] and record(lake)["marks"]["messages"] == str(c)

    # when: CORRELAKE_FULL_LISTING_HOURS after the last full listing by the runs' clock (or on demand,
    # `full_listing`: test_bronze's grown file)
    assert discovery.find(str(landing), lake, now=listed_at + DAY - 1).files == []
    assert [f.path for f in discovery.find(str(landing), lake, now=listed_at + DAY).files] == [str(late)]
