"""Benchmark: generate a workload, run the pipeline, write a report (JSON + markdown).

    .venv/bin/python scripts/benchmark.py --messages 100000 --events 100000 [--skew uniform|zipf|hot]
        [--increment 0.01[,0.001...]] [--increment-time within|after] [--repeat 1] [--hourly]
        [--via process|cli|driver|kept] [--input canonical|zeebe] [--out .local/bench]

Not run by CI. Reports time per stage and gate (and, for runs in this process, the
seconds the JVM spent compiling: `jit`), rows/s, and the floor: the time the
same Spark takes to read the same JSON and write it once to Delta, measured twice: in a
fresh process before the first run (a cold JVM, as the first run's; Spark's start not
counted in either) and at the end in this process (warm). Each --increment
share (of the first run's records) lands in its own folder and runs on its own copy of
the first run's lake, so that increments of several sizes are measured on the same
history; --repeat runs each again on fresh copies, to show how much a long-lived
driver gains as its JVM warms up; with --hourly, each repeat is instead the next hour's
increment, with records of its own, on the lake the one before left (as hourly runs go).
--via says what runs the increments: this process
(default), a fresh `correlake run` process each with its own JVM (`cli`), `correlake run`
on a `correlake serve` driver started (and warmed up) for them (`driver`), or fresh
`correlake run` processes as cron starts them, on the kept driver (`kept`): the lake's
first run as a `correlake run` too (into a lake of its own; it starts the kept driver,
which the increments then find after its idle warm-up, as cron's next run an hour
later would), the driver stopped at the end.
--increment-time says when the increment's records happen: within the first run's hour
(late data, interleaved with the history: `as_of` stays), or in the hour after it (as
hourly runs go: `as_of` moves, so the statuses of `gold/messages` that cross are updated).
--input zeebe lands the same records as a Zeebe export instead (docs/zeebe.md): every
landing of the workload converted at once by tests/support/zeebe_export.py (two partitions,
three unmapped records per mapped one: jobs, variables, commands…), each landing holding
the records of its own hour (so one increment share, in the hour after or hourly).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

CORRELAKE = str(Path(sys.executable).with_name("correlake"))


def floor_seconds(spark, landing: Path, target: Path) -> float:
    """Read the landing JSON with Spark and write it once to Delta."""
    from correlake.config import LANDING_STREAMS

    start = time.perf_counter()
    for stream in (s for s in LANDING_STREAMS if (landing / s).is_dir()):
        (spark.read.json(str(landing / stream / "*" / "*.jsonl")).write.format("delta").mode("overwrite")
         .save(str(target / stream)))
    return time.perf_counter() - start


def cold_floor_seconds(landing: Path, target: Path) -> float:
    """`floor_seconds` in a fresh process: a cold JVM, as the first run meets it."""
    code = ("import sys; from pathlib import Path; from benchmark import floor_seconds; "
            "from correlake.runtime.session import get_spark; "
            "print(floor_seconds(get_spark(), Path(sys.argv[1]), Path(sys.argv[2])))")
    done = subprocess.run([sys.executable, "-c", code, str(landing), str(target)], cwd=Path(__file__).parent,
                          capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def as_zeebe_export(landings: list[Path], starts: list[int], files: int = 8) -> list[int]:
    """The canonical landings (in time order, landing i's records from `starts[i]` on) as one
    Zeebe export, written to their zeebe/ folders in place of their canonical streams; the lines of each."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.zeebe_export import convert

    def rows(stream: str) -> list:
        return [json.loads(line) for landing in landings for path in sorted((landing / stream).rglob("*.jsonl"))
                for line in path.open()]

    export = convert(rows("messages"), rows("workflow_events"), partitions=2, noise=3)
    parts = [[] for _ in landings]
    for r in export.records:
        parts[max(bisect.bisect_right(starts, r["timestamp"]) - 1, 0)].append(r)
    for landing, part in zip(landings, parts):
        for stream in ("messages", "workflow_events"):
            shutil.rmtree(landing / stream)
        folder = landing / "zeebe" / "batch-000000000001"
        folder.mkdir(parents=True)
        for f in range(files):
            (folder / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part[f::files]))
    return [len(part) for part in parts]


def files_per_table(spark, lake: Path) -> dict:
    """Active data files of every lake table (Delta's DESCRIBE DETAIL)."""
    from correlake.config import TABLES, table_path
    from correlake.lake import tables as lake_io
    from correlake.lake.sqlfiles import delta_table

    return {name: spark.sql(f"DESCRIBE DETAIL {delta_table(table_path(lake, name))}").first()["numFiles"]
            for name in TABLES if lake_io.is_table(table_path(lake, name))}


def peak_rss_mb(pid: int) -> int:
    """Peak resident memory (VmHWM) of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) // 1024


def jvm_peak_rss_mb(spark) -> int:
    """Peak resident memory of this process's Spark JVM."""
    return peak_rss_mb(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


@contextmanager
def served_driver(out: Path, report: dict):
    """A `correlake serve` (default warm-up) for the increments; its socket. Records its
    warm-up and, at the end, the peak RSS of its JVM and of its Python process."""
    from correlake.driver.launch import jvm_pid, spawn

    socket, log = out / "driver.sock", out / "driver.log"
    start = time.perf_counter()
    process = spawn(socket, log)
    report["driver_ready_s"] = round(time.perf_counter() - start, 1)
    report["driver_warm_up"] = re.search(r"warming up \(runs of (.*) s\)", log.read_text()).group(1)
    try:
        yield socket
    finally:
        jvm = jvm_pid(process.pid)
        report["driver_peak_rss_mb"] = {"jvm": peak_rss_mb(jvm) if jvm else None, "python": peak_rss_mb(process.pid)}
        process.send_signal(signal.SIGTERM)
        process.wait(120)


KEPT: list[tuple[int, Path]] = []  # the kept drivers that runs of --via kept started: (pid, log)


def wait_for_warm_up(log: Path, deadline_s: float = 900.0) -> None:
    """Wait until the kept driver writing `log` has had its idle warm-up (or say why not)."""
    start = time.perf_counter()
    while time.perf_counter() - start < deadline_s:
        text = log.read_text()
        if "warmed up" in text:
            return
        if "warm-up failed" in text or "it stops" in text:
            raise SystemExit(f"the kept driver's warm-up did not happen: see {log}")
        time.sleep(1)
    raise SystemExit(f"the kept driver did not warm up within {deadline_s:.0f} s: see {log}")


def cli_env(via: str, socket: Path | None) -> dict:
    """A `correlake run`'s environment: on the benchmark's driver, on the kept driver, or on its own JVM."""
    env = {key: value for key, value in os.environ.items() if key not in ("CORRELAKE_DRIVER", "CORRELAKE_KEEP_DRIVER")}
    if via == "driver":
        return {**env, "CORRELAKE_DRIVER": str(socket)}
    return env if via == "kept" else {**env, "CORRELAKE_KEEP_DRIVER": "0"}


def jit_ms(spark) -> int:
    """Milliseconds this process's JVM has spent compiling so far (HotSpot's compilation
    bean: the time of each compilation, summed over its compiler threads)."""
    return spark.sparkContext._jvm.java.lang.management.ManagementFactory.getCompilationMXBean(
    ).getTotalCompilationTime()


def run_in_process(spark, landing: Path, lake: Path):
    """`pipeline.run` in this process; its result and its timings, with the JIT's seconds."""
    from correlake.run import pipeline

    before = jit_ms(spark)
    result = pipeline.run(spark, str(landing), str(lake), max_quarantine_ratio=1.0)
    return result, {**result.timings, "jit": round((jit_ms(spark) - before) / 1000, 1)}


def run_increment(spark, via: str, landing: Path, lake: Path, socket: Path | None) -> dict:
    """One increment run, in this process or through the CLI; its timings (seconds)."""
    if via == "process":
        result, timings = run_in_process(spark, landing, lake)
        return {**timings, "touched_groups": result.touched_groups}
    done = subprocess.run([CORRELAKE, "run", "--landing", str(landing), "--lake", str(lake), "--max-quarantine-ratio",
                           "1"], env=cli_env(via, socket), capture_output=True, text=True, check=True)
    if kept := re.search(r"started a driver \(pid (\d+).*its log: (.*)\)$", done.stderr, re.MULTILINE):
        KEPT.append((int(kept.group(1)), Path(kept.group(2))))
    timings = re.search(r"timings +(.*)", done.stdout).group(1)
    return {**{k: float(v.rstrip("s")) for k, v in (item.split(" ") for item in timings.split(", ")) if k != "total"},
            "touched_groups": int(re.search(r"key groups recomputed (\d+)", done.stdout).group(1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--skew", choices=["uniform", "zipf", "hot"], default="uniform")
    parser.add_argument("--increment", default="", help="then increments of these shares (comma-separated)")
    parser.add_argument("--increment-time", choices=["within", "after"], default="within",
                        help="the increments' records: late, within the first run's hour, or in the hour after")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each increment this many times, each on a fresh copy (JIT and codegen warm up)")
    parser.add_argument("--hourly", action="store_true",
                        help="each repeat is instead the next hour's increment (records of its own) on the lake "
                             "the one before left, as hourly runs go (with --via kept: on the kept driver's lake)")
    parser.add_argument("--via", choices=["process", "cli", "driver", "kept"], default="process",
                        help="run the increments in this process, as fresh `correlake run` processes, on a driver, "
                             "or as fresh `correlake run` processes on the kept driver")
    parser.add_argument("--input", choices=["canonical", "zeebe"], default="canonical",
                        help="the landings' records as canonical streams or as a Zeebe export of them")
    parser.add_argument("--out", default=".local/bench")
    args = parser.parse_args()
    shares = [float(x) for x in args.increment.split(",") if x]
    if args.input == "zeebe" and (len(shares) > 1 or args.increment_time == "within" and not args.hourly):
        parser.error("--input zeebe takes one --increment share, in the hour after (--increment-time after) or --hourly")

    from correlake.run import pipeline
    from correlake.runtime.session import get_spark
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate

    out = Path(args.out).resolve()  # the cold floor runs in scripts/
    shutil.rmtree(out, ignore_errors=True)
    landing, lake = out / "landing", out / "lake"
    t = time.perf_counter()
    generate(landing, args.messages, args.events, args.skew)
    increments = {}  # (share's index, repeat) -> its landing and its records' first time
    for i, share in enumerate(shares):
        for k in range(args.repeat if args.hourly else 1):
            start_ms = BASE_MS + (HOUR_MS * (k + 1) if args.increment_time == "after" or args.hourly else 0)
            increments[i, k] = (out / f"increment{i}" / (f"landing{k}" if args.hourly else "landing"), start_ms)
            generate(increments[i, k][0], int(args.messages * share), int(args.events * share), args.skew,
                     seed=2 + i + 100 * k, first_position=10 ** 9 + 10 ** 8 * k, start_ms=start_ms)
    report = {"workload": vars(args), "generate_s": round(time.perf_counter() - t, 1)}
    if args.input == "zeebe":
        t = time.perf_counter()
        report["landing_lines"] = as_zeebe_export([landing, *(v[0] for v in increments.values())],
                                                  [BASE_MS - HOUR_MS, *(v[1] for v in increments.values())])
        report["convert_s"] = round(time.perf_counter() - t, 1)
    report["floor_cold_s"] = round(cold_floor_seconds(landing, out / "floor_cold"), 1)
    t = time.perf_counter()
    spark = get_spark()
    report["spark_start_s"] = round(time.perf_counter() - t, 1)
    runs = []
    t = time.perf_counter()
    result, timings = run_in_process(spark, landing, lake)
    runs.append({"run": "first", "total_s": round(time.perf_counter() - t, 1), **timings})
    if args.via == "kept":  # as cron runs it: the lake's first run starts the kept driver
        t = time.perf_counter()
        timings = run_increment(spark, "kept", out / "landing", out / "lake_kept", None)
        runs.append({"run": "first, a fresh `correlake run` (it starts the kept driver)",
                     "total_s": round(time.perf_counter() - t, 1), **timings})
        t = time.perf_counter()  # as cron's next run comes an hour later: the driver has had its idle warm-up
        wait_for_warm_up(KEPT[0][1])
        report["kept_driver_idle_warm_up_s"] = round(time.perf_counter() - t, 1)
    with served_driver(out, report) if args.via == "driver" and shares else nullcontext() as socket:
        for i, share in enumerate(shares):
            n_m, n_e = int(args.messages * share), int(args.events * share)
            hourly_lake = out / f"increment{i}" / "lake"
            if args.hourly and args.via != "kept":
                shutil.copytree(out / "lake", hourly_lake)
            for k in range(args.repeat):
                landing = increments[i, k if args.hourly else 0][0]
                if args.hourly:
                    lake = out / "lake_kept" if args.via == "kept" else hourly_lake
                else:
                    lake = out / f"increment{i}" / f"lake{k}"
                    shutil.copytree(out / "lake", lake)
                t = time.perf_counter()
                timings = run_increment(spark, args.via, landing, lake, socket)
                runs.append({"run": f"increment {n_m}+{n_e}" + (f" #{k + 1}" if args.repeat > 1 else ""),
                             "total_s": round(time.perf_counter() - t, 1), **timings})
                if k < args.repeat - 1 and not args.hourly:
                    shutil.rmtree(lake)
    t = time.perf_counter()
    pipeline.run(spark, str(out / "landing"), str(out / "lake"))  # the first run's landing again
    runs.append({"run": "nothing new", "total_s": round(time.perf_counter() - t, 1)})
    t = time.perf_counter()  # the same as an hourly cron job would start it: no JVM needed (run/unchanged.py)
    subprocess.run([CORRELAKE, "run", "--landing", str(out / "landing"), "--lake", str(out / "lake")],
                   capture_output=True, check=True)
    runs.append({"run": "nothing new, a fresh `correlake run` process", "total_s": round(time.perf_counter() - t, 1)})
    t = time.perf_counter()  # a quiet hour: no record, as_of an hour on
    quiet = pipeline.run(spark, str(out / "landing"), str(out / "lake"), as_of=result.as_of + HOUR_MS)
    runs.append({"run": "a quiet hour (as_of + 1 h)", "total_s": round(time.perf_counter() - t, 1),
                 "statuses_changed": quiet.statuses_changed})
    for pid, _ in KEPT:
        os.kill(pid, signal.SIGTERM)
    report["runs"] = runs
    report["floor_s"] = round(floor_seconds(spark, out / "landing", out / "floor"), 1)
    report["records_per_s_first_run"] = round((args.messages + args.events) / runs[0]["total_s"])
    report["first_run_over_floor"] = {"cold": round(runs[0]["total_s"] / report["floor_cold_s"], 1),
                                      "cold_run_over_warm_floor": round(runs[0]["total_s"] / report["floor_s"], 1)}
    report["python_driver_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    report["jvm_peak_rss_mb"] = jvm_peak_rss_mb(spark)  # local mode: the driver and its executors
    report["files_per_table"] = files_per_table(spark, out / "lake")
    (out / "report.json").write_text(json.dumps(report, indent=2))
    lines = [f"# correlake benchmark: {args.messages} messages + {args.events} events ({args.skew})"
             + (f", as a Zeebe export of {report['landing_lines']} lines" if args.input == "zeebe" else ""), "",
             f"Spark start {report['spark_start_s']} s; floor (read JSON, write Delta once) "
             f"{report['floor_cold_s']} s in a fresh process (cold JVM, as the first run), {report['floor_s']} s warm "
             f"(at the end); the first run took {report['first_run_over_floor']['cold']} × the cold floor "
             f"({report['first_run_over_floor']['cold_run_over_warm_floor']} × the warm one); "
             f"peak RSS: Spark JVM {report['jvm_peak_rss_mb']} MB, Python driver "
             f"{report['python_driver_peak_rss_mb']} MB", "",
             f"Active files per table: {report['files_per_table']}", "",
             f"Increments run via: {args.via}" + (f" (driver ready after {report['driver_ready_s']} s, warm-up runs "
                                                 f"{report['driver_warm_up']} s, peak RSS "
                                                 f"{report['driver_peak_rss_mb']} MB)" if "driver_ready_s" in report
                                                 else "")
             + ("; each increment's records in the hour after the one before" if args.hourly
                else f"; their records {args.increment_time} the first run's hour"), "",
             "| run | total s | stages |", "|---|---|---|"]
    for r in runs:
        stages = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("run", "total_s"))
        lines.append(f"| {r['run']} | {r['total_s']} | {stages} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
