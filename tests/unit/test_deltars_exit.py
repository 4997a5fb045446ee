"""A process that reads the lake with delta-rs exits cleanly: a `correlake run` with
nothing new reads the bookkeeping and ends without a JVM, a `correlake deliver` reads the
outbox. Through pyarrow's scan threads, about one process in two (the bookkeeping) or in
fifteen (the outbox) aborted at exit ("terminate called without an active exception"),
after printing its answer."""

from __future__ import annotations

import subprocess
import sys

from correlake.contract.schemas import OUTBOX
from correlake.lake import deltars, meta

READ = """import sys
from correlake.delivery.tables import Outbox
from correlake.lake import meta
outbox = Outbox(sys.argv[1], 3)
keys = outbox.keys(outbox.ids()).to_pydict()
by_file = {}
for file, event_id in zip(keys["file"], keys["event_id"]):
    by_file.setdefault(file, []).append(event_id)
print(len(meta.ingested(sys.argv[1])), len(keys["event_id"]), len(outbox.bodies(by_file)))"""


def test_processes_that_read_the_lake_with_delta_rs_exit_with_0(tmp_path):
    lake = str(tmp_path / "lake")
    for run in range(4):  # a file each: the scans read several files
        meta.record_ingested(lake, [("messages", f"/landing/messages/{run}.jsonl", 10, 1_000, 3, 2_000, f"r{run}")],
                             f"r{run}")
        deltars.write(lake, "outbox", deltars.from_rows(OUTBOX, [
            (f"e{run}", "CORRELATED", "", "k", "k", run, "p", 1, 0, "{}", f"r{run}")]))
    for _ in range(12):
        done = subprocess.run([sys.executable, "-c", READ, lake], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (0, "4 4 4\n", "")
