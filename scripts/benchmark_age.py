"""Benchmark of a lake's age, landing part (issue 83): the next hour (20 new files) on a
landing of 40 ingested files and on one of --files (100,000) ingested files, by turns.

    .venv/bin/python scripts/benchmark_age.py [--files 100000] [--turns 3] [--out .local/bench-age]

Not run by CI. One SparkSession, as on the kept driver; the landings declared ordered
(CORRELAKE_FULL_LISTING_HOURS=24). Each landing gets one real run
over its first hour (20 files per stream, `samples/workload.micro_batch`). The large
landing then gets its older files, hourly folders before that hour, and their rows of
`_meta/ingested_files` are written directly with delta-rs, as a backfill would (one
commit, each file's path, size and mtime as listed: a run takes them as ingested). Both
then get the same next hour, 10 files per stream in the hour after. Each turn runs that
hour on a fresh copy of each lake, in turn: the small landing, the large one, and the
large one with `full_listing` (every path against every ingested file, what every run
did before discovery followed what is new). Prints a markdown table and writes
report.json to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_HOUR = datetime(2026, 12, 4, 10, tzinfo=timezone.utc)
PER_HOUR_FOLDER = 10  # older files per stream and hour folder (ten producers)


def hour_folder(hour: datetime) -> str:
    return hour.strftime("%Y/%m/%d/%H")


def land_hour(landing: Path, hour: datetime, files: int, first_position: int) -> None:
    """`files` files per stream in the hour's folder: a micro-batch of 5 correlations each."""
    from correlake.samples.workload import micro_batch

    for stream in ("messages", "workflow_events"):
        (landing / stream / hour_folder(hour)).mkdir(parents=True, exist_ok=True)
    start_ms = int(hour.timestamp() * 1000)
    for n in range(files):
        micro_batch(landing, 5, first_position + 100 * n, start_ms + 1000 * n, f"{hour_folder(hour)}/p{n:02d}")


def backfill(landing: Path, lake: str, files: int) -> None:
    """`files` older files (two streams, hourly folders before FIRST_HOUR) written, and
    recorded as ingested in one delta-rs commit."""
    from correlake.lake import meta

    rows, now = [], int(time.time() * 1000)
    for n in range(files // 2):
        hour = FIRST_HOUR - timedelta(hours=1 + n // PER_HOUR_FOLDER)
        for stream in ("messages", "workflow_events"):
            path = landing / stream / hour_folder(hour) / f"p{n % PER_HOUR_FOLDER:02d}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n")
            st = os.stat(path)
            rows.append((stream, str(path), st.st_size, st.st_mtime_ns // 1_000_000, 1, now, "backfill"))
    meta.record_ingested(lake, rows, "backfill")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000, help="ingested files of the large landing")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / ".local" / "bench-age"))
    args = parser.parse_args()
    os.environ.setdefault("CORRELAKE_FULL_LISTING_HOURS", "24")  # the landings' paths are lexically ordered

    from correlake.run import pipeline
    from correlake.runtime.session import get_spark

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    spark = get_spark()
    bases = {}
    for name, older in (("small", 0), ("large", args.files - 40)):
        landing, lake = out / f"landing-{name}", str(out / f"lake-{name}")
        land_hour(landing, FIRST_HOUR, 20, 1_000_000)
        pipeline.run(spark, str(landing), lake, max_quarantine_ratio=1.0)
        started = time.perf_counter()
        if older:
            backfill(landing, lake, older)
        print(f"{name}: {40 + older} files ingested (backfill {time.perf_counter() - started:.1f} s)")
        land_hour(landing, FIRST_HOUR + timedelta(hours=1), 10, 2_000_000)
        bases[name] = (landing, lake)
    cases = {"40 files": ("small", False), f"{args.files:,} files": ("large", False),
             f"{args.files:,} files, full listing": ("large", True)}
    seconds = {case: [] for case in cases}
    for turn in range(args.turns + 1):  # turn 0 warms up: not counted
        for case, (name, full) in cases.items():
            landing, lake = bases[name]
            copy = str(shutil.copytree(lake, out / "turn-lake", dirs_exist_ok=False))
            started = time.perf_counter()
            result = pipeline.run(spark, str(landing), copy, max_quarantine_ratio=1.0, full_listing=full)
            elapsed = round(time.perf_counter() - started, 2)
            shutil.rmtree(copy)
            assert result.files == 20, (case, result.files)
            if turn:
                seconds[case].append(elapsed)
            print(f"turn {turn} {case}: {elapsed} s")
    base = statistics.median(seconds["40 files"])
    lines = ["| landing | next hour (s), by turn | median | ratio to 40 files |", "|---|---|---|---|"]
    lines += [f"| {case} | {', '.join(map(str, s))} | {statistics.median(s):.2f} | "
              f"{statistics.median(s) / base:.2f}× |" for case, s in seconds.items()]
    print("\n".join(lines))
    (out / "report.json").write_text(json.dumps({"files": args.files, "turns": args.turns, "seconds": seconds},
                                                indent=2))


if __name__ == "__main__":
    main()
