"""Benchmark: micro-batches on a lake with history (issue 65's (j) and (l)).

    .venv/bin/python scripts/benchmark_microbatch.py --messages 100000 --events 100000 \
        [--batches 5] [--pairs 10] [--via process|kept] [--paths auto,spark] [--profile] [--out .local/bench-micro]

Not run by CI. Generates a lake's history (`samples/workload.generate`) and runs it once,
then lands `--batches` micro-batches, each `--pairs` catch subscriptions and a message for
each (`samples/workload.micro_batch`: 2 × pairs records, pairs correlations), in the hour
after the history, and runs each as it lands. Each path of `--paths` (`auto`: the size
decides; `spark`: the engine through Spark tasks, forced) gets its own copy of the lake
and the same micro-batches, alternately, so that both are measured in the same minutes.
`--via process` runs them with `pipeline.run` in this process (with each run's Spark job
count), `--via kept` as fresh `correlake run` processes on the kept driver (end to end, as
cron or `correlake watch` would; the driver is stopped at the end). Then a 1 % next-hour
increment (`--increment`, 0 to skip) on each path's lake, against the first run (target
(l)). Each path's first run takes that path too (`driver` forced: the engine in the driver over the
whole history), so that the gold stage of both paths over the same records sizes the
threshold (run it with a history about DRIVER_ROOM_RECORDS).
`--profile` (with `--via process`) keeps Spark's event log and sorts the last micro-batch's
Spark jobs by kind, with their count and seconds. `--threshold 5000,20000,…` measures
only the gold stage of first runs of those sizes on both paths (`measure_threshold`).
Writes `report.json` and `report.md` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CORRELAKE = str(Path(sys.executable).with_name("correlake"))


def last_job_id(spark) -> int:
    """The newest Spark job's id in this process (job ids are consecutive)."""
    tracker = spark.sparkContext.statusTracker()
    return max([-1, *tracker.getJobIdsForGroup(None), *tracker.getActiveJobsIds()])


def run_once(spark, via: str, path: str, landing: Path, lake: Path) -> dict:
    """One run of `landing` into `lake` on `path`; its seconds, stage timings, path taken and jobs."""
    if via == "process":
        from correlake.run import pipeline

        before, start = last_job_id(spark), time.perf_counter()
        result = pipeline.run(spark, str(landing), str(lake), max_quarantine_ratio=1.0, path=path)
        return {"total_s": round(time.perf_counter() - start, 2), "path": result.path,
                "jobs": last_job_id(spark) - before, "correlations": result.correlations, **result.timings}
    start = time.perf_counter()
    done = subprocess.run([CORRELAKE, "run", "--landing", str(landing), "--lake", str(lake),
                           "--max-quarantine-ratio", "1"], env={**os.environ, "CORRELAKE_RUN_PATH": path},
                          capture_output=True, text=True, check=True)
    total = round(time.perf_counter() - start, 2)
    timings = re.search(r"timings +(.*)", done.stdout).group(1)
    taken = re.search(r", path (\w+)", done.stdout)
    return {"total_s": total, "path": taken.group(1) if taken else "?",
            **{k: float(v.rstrip("s")) for k, v in (i.split(" ") for i in timings.split(", ")) if k != "total"}}


JOB_KINDS = (  # (kind, what its job description or last stage's name holds), first match
    ("a join's broadcast side", "withThreadLocalCaptured"), ("checkpoint", "localCheckpoint"),
    ("gate metrics", "metrics.py"), ("MERGE", "MERGE"), ("Delta file listing, snapshot", "Delta"),
    ("Delta write, append", "save at"), ("collect, count, isEmpty", ""))


def job_profile(event_log: Path, jobs: int) -> dict:
    """The last `jobs` Spark jobs of the event log, by kind (JOB_KINDS): count and seconds."""
    events = [json.loads(line) for line in subprocess.run(
        ["zstd", "-dc", *map(str, event_log.rglob("events_*"))], capture_output=True, text=True, check=True
    ).stdout.splitlines()]
    starts = {e["Job ID"]: e for e in events if e["Event"] == "SparkListenerJobStart"}
    ends = {e["Job ID"]: e["Completion Time"] for e in events if e["Event"] == "SparkListenerJobEnd"}
    profile: dict = {}
    for job in sorted(starts)[-jobs:]:
        start = starts[job]
        text = (start.get("Properties", {}).get("spark.job.description") or "") + " " + " ".join(
            s["Stage Name"] for s in start["Stage Infos"][-1:])
        kind = next(k for k, mark in JOB_KINDS if mark in text)
        count, seconds = profile.get(kind, (0, 0.0))
        profile[kind] = (count + 1, round(seconds + (ends[job] - start["Submission Time"]) / 1000, 2))
    return dict(sorted(profile.items(), key=lambda kv: -kv[1][1]))


def measure_threshold(spark, sizes: list[int], out: Path) -> None:
    """The gold stage (the engine and what follows it) of a first run of each size (records:
    half messages, half workflow events) on each path, forced, three times each, alternately,
    after a warm-up run: where the driver backend stops paying sizes DRIVER_ROOM_RECORDS."""
    from correlake.samples.workload import generate

    runs: dict = {}
    for size in [sizes[0], *sizes]:  # the first: the process's warm-up, not reported
        landing = out / f"threshold-{size}"
        if not landing.exists():
            generate(landing, size // 2, size // 2, "uniform")
        for _ in range(3):
            for path in ("driver", "spark"):
                shutil.rmtree(out / "threshold-lake", ignore_errors=True)
                run = run_once(spark, "process", path, landing, out / "threshold-lake")
                runs.setdefault(size, {}).setdefault(path, []).append(run["gold"])
    lines = ["# the driver backend's threshold: a first run's gold stage, seconds (median of 3)", "",
             "| records | driver backend | Spark backend | driver / Spark |", "|---|---|---|---|"]
    for size in sizes:
        small, spark_s = (statistics.median(runs[size][p]) for p in ("driver", "spark"))
        lines.append(f"| {size} | {small:.2f} | {spark_s:.2f} | {small / spark_s:.2f} |")
    (out / "report.json").write_text(json.dumps({"threshold": runs}, indent=2))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--increment", type=float, default=0.01, help="then this share as the next hour (0: none)")
    parser.add_argument("--via", choices=["process", "kept"], default="kept")
    parser.add_argument("--paths", default="auto,spark", help="comma-separated: auto, spark, small")
    parser.add_argument("--profile", action="store_true", help="Spark jobs by kind (with --via process)")
    parser.add_argument("--threshold", default="", help="comma-separated record counts: only the threshold's "
                        "measurement (below)")
    parser.add_argument("--out", default=".local/bench-micro")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    if args.profile:
        (out / "events").mkdir(parents=True)
        os.environ["CORRELAKE_SPARK_CONF"] = f"spark.eventLog.enabled=true,spark.eventLog.dir=file://{out}/events"

    from correlake.runtime.session import get_spark
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate, micro_batch

    if args.threshold:
        return measure_threshold(get_spark(), [int(n) for n in args.threshold.split(",")], out)
    paths = args.paths.split(",")
    history = out / "landing"
    generate(history, args.messages, args.events, "uniform")
    spark = get_spark()
    report: dict = {"workload": vars(args), "first_runs": {}, "micro_batches": {p: [] for p in paths},
                    "increment": {}}
    for path in paths:  # each path's lake: the history's first run on that path, on its own copy of the landing
        landing = out / f"landing-{path}"
        shutil.copytree(history, landing)
        first = run_once(spark, args.via, path, landing, out / f"lake-{path}")
        report["first_runs"][path] = {"total_s": first["total_s"], "gold_s": first["gold"], "path": first["path"]}
    position = 10 ** 9
    for b in range(args.batches):
        start_ms = BASE_MS + HOUR_MS + b * 60_000
        for path in paths:
            micro_batch(out / f"landing-{path}", args.pairs, position, start_ms, f"micro-{b:04d}")
            run = run_once(spark, args.via, path, out / f"landing-{path}", out / f"lake-{path}")
            if args.profile and b == args.batches - 1:
                report.setdefault("profile", {})[path] = job_profile(out / "events", run["jobs"])
            report["micro_batches"][path].append(run)
        position += 2 * args.pairs
    if args.increment:
        n_m, n_e = int(args.messages * args.increment), int(args.events * args.increment)
        generate(out / "next-hour", n_m, n_e, "uniform", seed=7, first_position=2 * 10 ** 9,
                 start_ms=BASE_MS + 2 * HOUR_MS)
        for path in paths:
            for stream in ("messages", "workflow_events"):
                shutil.copytree(out / "next-hour" / stream, out / f"landing-{path}" / stream / "next-hour")
            run = run_once(spark, args.via, path, out / f"landing-{path}", out / f"lake-{path}")
            report["increment"][path] = {**run, "over_first_run": round(
                run["total_s"] / report["first_runs"][path]["total_s"], 2)}
    lines = [f"# micro-batches: {args.batches} × {2 * args.pairs} records on a {args.messages} + {args.events} lake, "
             f"via {args.via}", "", f"first runs: {report['first_runs']}", "",
             "| path | batch | total s | path taken | jobs | stages |", "|---|---|---|---|---|---|"]
    for path, runs in report["micro_batches"].items():
        for i, r in enumerate(runs):
            stages = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("total_s", "path", "jobs", "correlations"))
            lines.append(f"| {path} | {i + 1} | {r['total_s']} | {r['path']} | {r.get('jobs', '')} | {stages} |")
        report.setdefault("median_s", {})[path] = statistics.median(r["total_s"] for r in runs)
    lines += ["", f"median seconds per micro-batch: {report['median_s']}"]
    for path, kinds in report.get("profile", {}).items():
        lines += ["", f"the last micro-batch's Spark jobs on path {path}, by kind (jobs, seconds): "
                  + "; ".join(f"{kind} {n}, {s} s" for kind, (n, s) in kinds.items())]
    for path, r in report["increment"].items():
        lines.append(f"1 % next hour on path {path}: {r['total_s']} s ({r['path']}), {r['over_first_run']} × the "
                     "first run")
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.via == "kept":  # the kept driver the runs started
        subprocess.run([CORRELAKE, "serve", "--stop"], capture_output=True, check=False)


if __name__ == "__main__":
    main()
