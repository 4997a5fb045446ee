"""Benchmark of a lake's age (issue 83), in two parts, each the same next hour on copies
of lakes of different ages, by turns.

    .venv/bin/python scripts/benchmark_age.py [--part landing] [--files 100000] [--turns 3] [--out .local/bench-age]
    .venv/bin/python scripts/benchmark_age.py --part lake [--hours 100] [--records 500] [--turns 2] [--gold-deletion-vectors]
        [--next-hour own|shared] [--lives random|ending] [--trimmed-log]

Not run by CI. One SparkSession, as on the kept driver.

**The lake part**: three lakes of the same hourly workload (`samples/workload.generate`,
--records messages and as many workflow events an hour over --keys keys): one of 1 hour,
one of --hourly (24) hourly runs and a `correlake maintain`, one of --hours hours backfilled in one
run; with --trimmed-log also a copy of the maintained one whose tables' logs hold nothing
before their last checkpoints (`trim_log`: what the log's cleanup would leave were its
retention shorter than a day). Each then gets the same next hour (the same records, an hour after its last): by
default in a tenant of its own (`--next-hour own`, as issue 83 measured it: what the history
costs an hour that touches none of its keys), or on the history's keys (`--next-hour
shared`: the hour's key groups are replayed with all they hold). Beside
the time, what the run read and rewrote, which the machine's load does not change
(`run_metrics.py`): Spark jobs, stages, tasks, files, bytes and rows its scans read (Delta's
log replays included), the commits past each table's checkpoint and the log's files before
it, and its MERGEs' target files removed and added and rows copied.

**The landing part**: the next hour (20 new files) on a landing of 40 ingested files and on
one of --files (100,000) ingested files. The landings declared ordered
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
NEXT_HOUR_TENANT = "next-hour"  # the lake part's next hour with `--next-hour own`


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


def trim_log(lake: Path) -> int:
    """Each table's `_delta_log` files of versions before its last checkpoint removed (their
    Hadoop checksum files too): what Delta's log cleanup leaves of commits older than the
    log's retention (LOG_RETAIN_HOURS, a week). Returns how many were removed."""
    from run_metrics import last_checkpoint

    removed = 0
    for log in lake.rglob("_delta_log"):
        checkpoint = last_checkpoint(log)
        for path in log.iterdir():
            version = path.name.lstrip(".").split(".")[0]
            if version.isdigit() and int(version) < checkpoint:
                path.unlink()
                removed += 1
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("landing", "lake"), default="landing")
    parser.add_argument("--reuse", action="store_true", help="lake part: keep the lakes --out holds, built before")
    parser.add_argument("--hourly", type=int, default=24, help="lake part: hourly runs of the maintained lake (0: none)")
    parser.add_argument("--hours", type=int, default=100, help="lake part: hours of the backfilled lake")
    parser.add_argument("--records", type=int, default=500, help="lake part: messages (and events) an hour")
    parser.add_argument("--keys", type=int, default=2500, help="lake part: correlation keys over all hours")
    parser.add_argument("--next-hour", choices=("own", "shared"), default="own",
                        help="lake part: the next hour in a tenant of its own (as issue 83 measures), or on the "
                             "history's keys (its key groups replayed)")
    parser.add_argument("--lives", choices=("random", "ending"), default="random",
                        help="lake part: the workload's events (samples/workload.py): random kinds and times, or "
                             "lives that end within half an hour, as an engine's instances complete")
    parser.add_argument("--trimmed-log", action="store_true",
                        help="lake part: also the maintained lake with its log before its checkpoints removed (what "
                             "a log retention under a day would leave)")
    parser.add_argument("--gold-deletion-vectors", action="store_true",
                        help="lake part: gold's tables of each copy given deletion vectors before the hour")
    parser.add_argument("--files", type=int, default=100_000, help="ingested files of the large landing")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / ".local" / "bench-age"))
    args = parser.parse_args()
    out = Path(args.out)
    if not args.reuse:
        shutil.rmtree(out, ignore_errors=True)
    (lake_part if args.part == "lake" else landing_part)(args, out)


def landing_part(args, out: Path) -> None:
    os.environ.setdefault("CORRELAKE_FULL_LISTING_HOURS", "24")  # the landings' paths are lexically ordered
    from correlake.run import pipeline
    from correlake.runtime.session import get_spark

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


def lake_part(args, out: Path) -> None:
    from run_metrics import EVENT_LOG_CONF, EventLog, log_state, merges, versions

    events = out / "events"
    events.mkdir(parents=True, exist_ok=True)
    os.environ["CORRELAKE_SPARK_CONF"] = ",".join(filter(None, (os.environ.get("CORRELAKE_SPARK_CONF"),
                                                                 EVENT_LOG_CONF.format(folder=events))))
    from correlake.config import GOLD_TABLES, table_path
    from correlake.lake.sqlfiles import delta_table
    from correlake.run import pipeline
    from correlake.run.maintenance import maintain
    from correlake.runtime.session import get_spark
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate

    spark, event_log = get_spark(), EventLog(events)

    def land(landing: Path, hour: int, seed: int, tenant_id: str | None = None) -> None:
        generate(landing, args.records, args.records, "uniform", seed=seed, files=1,
                 first_position=1 + hour * 10 ** 6, start_ms=BASE_MS + hour * HOUR_MS, key_count=args.keys,
                 tenant_id=tenant_id, lives=args.lives)

    def run(landing: Path, lake: str):
        return pipeline.run(spark, str(landing), lake, max_quarantine_ratio=1.0)

    cases = {"1 hour": 1, **({f"{args.hourly} hourly runs, maintained": args.hourly} if args.hourly else {}),
             f"{args.hours} hours backfilled": args.hours}
    bases = {}
    for case, hours in cases.items():
        landing, lake = out / f"landing-{hours}", str(out / f"lake-{hours}")
        bases[case] = (landing, lake)
        hourly = case.startswith(f"{args.hourly} hourly")
        if not (args.reuse and os.path.isdir(lake)):
            started = time.perf_counter()
            for hour in range(hours):
                land(landing, hour, hour + 1)
                if hourly:
                    run(landing, lake)
            if hourly:
                maintain(spark, lake)
            else:
                run(landing, lake)
            print(f"{case}: built in {time.perf_counter() - started:.1f} s", flush=True)
        if args.trimmed_log and hourly:
            trimmed = out / f"lake-{hours}-trimmed-log"
            if not (args.reuse and trimmed.is_dir()):
                shutil.rmtree(trimmed, ignore_errors=True)
                print(f"{case}: {trim_log(Path(shutil.copytree(lake, trimmed)))} log files removed", flush=True)
            bases[f"{case}, its log trimmed"] = (landing, str(trimmed))
        # the next hour: the same records for every lake, in a tenant of their own or on the history's keys
        land(landing, hours, 10 ** 6, NEXT_HOUR_TENANT if args.next_hour == "own" else None)
    seconds, measures = {case: [] for case in bases}, {}
    for turn in range(args.turns + 1):  # turn 0 warms up: its time is not counted
        for case, (landing, lake) in bases.items():
            copy = str(shutil.copytree(lake, out / "turn-lake"))
            if args.gold_deletion_vectors:
                for name in GOLD_TABLES:
                    spark.sql(f"ALTER TABLE {delta_table(table_path(copy, name))} "
                              "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
            before, state = versions(copy), log_state(copy)
            event_log.read()
            started = time.perf_counter()
            run(landing, copy)
            elapsed = round(time.perf_counter() - started, 2)
            measures[case] = {**event_log.read(), **state, **merges(copy, before)}
            shutil.rmtree(copy)
            if turn:
                seconds[case].append(elapsed)
            print(f"turn {turn} {case}: {elapsed} s {measures[case]}", flush=True)
    print(lake_table(seconds, measures))
    (out / "report.json").write_text(json.dumps({"args": vars(args), "seconds": seconds, "measures": measures},
                                                indent=2))


def lake_table(seconds: dict, measures: dict) -> str:
    base = statistics.median(next(iter(seconds.values())))
    columns = ("jobs", "stages", "tasks", "number of files read", "size of files read",
               "internal.metrics.input.recordsRead", "commits past checkpoints", "log files", "merges",
               "numTargetFilesRemoved", "numTargetFilesAdded", "numTargetRowsCopied")
    lines = ["| lake | next hour (s), by turn | ratio of medians | " + " | ".join(columns) + " |",
             "|---|---|---|" + "---|" * len(columns)]
    for case, s in seconds.items():
        cells = [str(measures[case].get(c, 0)) for c in columns]
        lines.append(f"| {case} | {', '.join(map(str, s))} | {statistics.median(s) / base:.2f}× | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
