"""A `correlake run` with nothing to do answers without Spark (`run/unchanged.py`): the same
summary as the run's own, in a process that has no Java; and whatever else a run would do
(new files, an as_of to move, an unfinished run, a migration) is left to Spark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from support.helpers import as_revision_1, versions

from correlake.config import lake_state_dir
from correlake.run import pipeline, unchanged
from correlake.run.summary import summary


def test_a_run_with_nothing_to_do_needs_no_jvm(spark, small_demo, tmp_path):
    landing, lake = str(small_demo[0]), str(tmp_path / "lake")
    shutil.copytree(small_demo[1], lake)
    before = versions(lake)
    quick = unchanged.check(landing, lake)
    assert quick is not None and summary(quick) == summary(pipeline.run(spark, landing, lake))

    no_java = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    no_java.update(JAVA_HOME=str(tmp_path / "no-java"), PATH=os.path.dirname(sys.executable))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "correlake.interfaces.cli", "run", "--landing", landing,
                           "--lake", lake], env=no_java, capture_output=True, text=True, timeout=120)
    print(f"a fresh `correlake run` with nothing to do: {time.perf_counter() - started:.2f} s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("correlake: nothing new to ingest; no table changed (as_of ")
    assert versions(lake) == before and not (lake_state_dir(lake) / "lock").exists()


def test_what_a_run_would_do_is_left_to_it(spark, small_demo, tmp_path):
    landing, lake = small_demo[0], tmp_path / "lake"
    shutil.copytree(small_demo[1], lake)
    as_of = unchanged.check(str(landing), str(lake)).as_of

    assert unchanged.check(str(landing), str(lake), as_of + 1) is None  # statuses to re-evaluate
    assert unchanged.check(str(landing), str(lake), as_of).nothing_new

    more = tmp_path / "landing"
    shutil.copytree(landing, more)
    (more / "messages" / "late.jsonl").write_text("{}\n")
    assert unchanged.check(str(more), str(lake)) is None  # a new file

    (lake_state_dir(lake) / "inflight.json").write_text(json.dumps({"run_id": "r", "versions": {}}))
    assert unchanged.check(str(landing), str(lake)) is None  # a run to roll back
    (lake_state_dir(lake) / "inflight.json").unlink()

    as_revision_1(spark, str(lake))
    assert unchanged.check(str(landing), str(lake)) is None  # revision 1: a migration
