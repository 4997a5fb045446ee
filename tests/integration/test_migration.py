"""A lake written under contract revision 1 (`as_of` on every gold/messages row, no
gold/as_of) is migrated by the first run of this version: no row lost, the summary says
so, and the same command again is a no-op."""

from __future__ import annotations

import shutil

from support.helpers import as_revision_1, sorted_gold, versions

from correlake.config import table_path
from correlake.interfaces import cli


def test_a_revision_1_lake_is_migrated_by_its_next_run(spark, small_demo, small_demo_gold, tmp_path, capsys):
    landing, lake = small_demo[0], str(tmp_path / "lake")
    shutil.copytree(small_demo[1], lake)
    rows = spark.read.format("delta").load(table_path(lake, "messages")).count()
    as_revision_1(spark, lake)
    assert "as_of" in spark.read.format("delta").load(table_path(lake, "messages")).columns
    assert cli.main(["report", "--lake", lake, "--out", str(tmp_path / "r.html")]) == 2  # readers ask for a run
    assert "gets gold_as_of from its next run" in capsys.readouterr().err

    run = ["run", "--landing", str(landing), "--lake", lake]
    assert cli.main(run) == 0
    out = capsys.readouterr().out
    assert "migrated the lake to contract revision 2" in out and "nothing new to ingest; no table changed" in out
    messages = spark.read.format("delta").load(table_path(lake, "messages"))
    assert "as_of" not in messages.columns and messages.count() == rows
    assert sorted_gold(lake) == small_demo_gold  # statuses, rows and the instant: as they were
    [row] = spark.read.format("delta").load(table_path(lake, "as_of")).collect()
    assert row["run_id"].endswith("-migration")

    before = versions(lake)
    assert cli.main(run) == 0
    assert "migrated" not in capsys.readouterr().out and versions(lake) == before
