"""A process that reads the lake's bookkeeping with delta-rs exits cleanly: a `correlake
run` with nothing new reads it and ends without a JVM. Read through pyarrow's dataset
scan, about one such process in two aborted at exit ("terminate called without an active
exception"), after printing its answer."""

from __future__ import annotations

import subprocess
import sys

from correlake.lake import meta

READ = "import sys; from correlake.lake import meta; print(len(meta.ingested(sys.argv[1])), meta.records_read(sys.argv[1]))"


def test_processes_that_read_the_bookkeeping_exit_with_0(tmp_path):
    lake = str(tmp_path / "lake")
    for run in range(4):  # a file each: the scan read several files at once
        meta.record_ingested(lake, [("messages", f"/landing/messages/{run}.jsonl", 10, 1_000, 3, 2_000, f"r{run}")],
                             f"r{run}")
    for _ in range(8):  # the abort came about one time in two
        done = subprocess.run([sys.executable, "-c", READ, lake], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (0, "4 0\n", "")
