"""Many small hourly runs in one process: Delta file counts with and without maintenance.

    .venv/bin/python scripts/many_runs.py [--runs 200] [--maintain-every 24] [--retain-hours H]
        [--messages 50] [--events 50] [--keys 2500] [--variants plain,maintained,autocompact]
        [--out .local/many_runs]

Not run by CI. One SparkSession. Each hour, an increment (`correlake.samples.workload.generate`)
lands and every variant's lake runs the pipeline on it, interleaved so that they share
the machine's load:
  plain        no maintenance;
  maintained   `correlake maintain` every --maintain-every runs (VACUUM at --retain-hours,
               default Delta's 168 h, which removes nothing in a lake younger than that);
  autocompact  no maintenance, Delta's optimized writes and auto compaction on (session conf).
After each run every file of each lake's tables is dated an hour earlier, so that the
retentions counted in hours (VACUUM's, the log's: `delta.logRetentionDuration`) act as on
a lake run once an hour. Every --maintain-every runs (before maintaining) and at the end, each lake is measured with
a dry-run maintenance: active data files (Delta snapshot), files on disk, _delta_log files.
At the end every lake gets one maintenance with an explicit 0 h retention, to show VACUUM
at work. Writes report.json and report.md under --out (rewritten at every measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

AUTO_COMPACT = {"spark.databricks.delta.optimizeWrite.enabled": "true",
                "spark.databricks.delta.autoCompact.enabled": "true"}
POSITIONS_PER_HOUR = 10 ** 6


@contextmanager
def session_conf(spark, conf: dict):
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in conf:
            spark.conf.unset(key)


def measure(spark, lake: Path) -> dict:
    """Per table: active files, files on disk, log files, files a VACUUM would delete now."""
    from correlake.run.maintenance import maintain

    return {t.table: {"active": t.files[0], "on_disk": t.on_disk[0], "log": t.log_files[0],
                      "bytes": t.bytes[0], "vacuumable": t.vacuumed}
            for t in maintain(spark, str(lake), dry_run=True).tables}


def age_an_hour(lake: Path) -> None:
    """Every file of the lake's tables (data and log) dated an hour earlier: the next run is an hour later."""
    from correlake.config import TABLES

    for relative in TABLES.values():
        for path in (lake / relative).rglob("*"):
            if path.is_file():
                st = path.stat()
                os.utime(path, ns=(st.st_atime_ns - 3600 * 10 ** 9, st.st_mtime_ns - 3600 * 10 ** 9))


def totals(tables: dict) -> dict:
    return {k: sum(t[k] for t in tables.values()) for k in ("active", "on_disk", "log", "vacuumable")}


def maintenance_row(result) -> dict:
    return {"seconds": result.seconds, "tables": {t.table: {"active": t.files, "on_disk": t.on_disk, "log": t.log_files,
                                                            "compacted": t.compacted, "purged_dvs": t.purged_dvs,
                                                            "vacuumed": t.vacuumed} for t in result.tables}}


def time_stats(seconds: list[float]) -> dict:
    if not seconds:
        return {}
    ordered = sorted(seconds)
    return {"mean": round(statistics.mean(seconds), 1), "median": round(statistics.median(seconds), 1),
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1), "max": round(ordered[-1], 1),
            "first_24_mean": round(statistics.mean(seconds[:24]), 1),
            "last_24_mean": round(statistics.mean(seconds[-24:]), 1)}


def markdown(report: dict) -> str:
    w, variants = report["workload"], list(report["variants"])
    lines = [f"# correlake: {report['runs_done']} hourly runs ({w['messages']} messages + {w['events']} workflow "
             f"events an hour, {w['keys']} keys), maintenance every {w['maintain_every']} runs", "",
             f"Shuffle partitions {report['shuffle_partitions']}; VACUUM retention of the maintained lake: "
             f"{w['retain_hours'] if w['retain_hours'] is not None else '168 (Delta default)'} h. "
             "Active = data files of the current Delta snapshot; on disk = data and deletion-vector files "
             "in the table folder (active + replaced, not yet vacuumed); log = files in `_delta_log`.", ""]
    final = {v: report["variants"][v].get("final") for v in variants}
    if all(final.values()):
        lines += ["## After the runs, per table (active / on disk / log)", "",
                  "| table | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
        for table in final[variants[0]]:
            cells = [f"{final[v][table]['active']} / {final[v][table]['on_disk']} / {final[v][table]['log']}"
                     for v in variants]
            lines.append(f"| {table} | " + " | ".join(cells) + " |")
        cells = [" / ".join(str(totals(final[v])[k]) for k in ("active", "on_disk", "log")) for v in variants]
        lines += ["| **total** | " + " | ".join(f"**{c}**" for c in cells) + " |", ""]
    lines += ["## Totals over time (active / on disk / log; measured before that run's maintenance)", "",
              "| after run | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for i, sample in enumerate(report["variants"][variants[0]]["samples"]):
        cells = []
        for v in variants:
            samples = report["variants"][v]["samples"]
            cells.append(" / ".join(str(samples[i]["totals"][k]) for k in ("active", "on_disk", "log"))
                         if i < len(samples) else "")
        lines.append(f"| {sample['run']} | " + " | ".join(cells) + " |")
    lines += ["", "## Time per run (s)", "", "| variant | mean | median | p90 | max | first 24 | last 24 | "
              "maintenance (mean s, count) |", "|---|---|---|---|---|---|---|---|"]
    for v in variants:
        s, m = report["variants"][v]["run_time"], report["variants"][v]["maintenance"]
        maint = f"{round(statistics.mean(x['seconds'] for x in m), 1)}, {len(m)}" if m else "–"
        lines.append(f"| {v} | {s.get('mean')} | {s.get('median')} | {s.get('p90')} | {s.get('max')} | "
                     f"{s.get('first_24_mean')} | {s.get('last_24_mean')} | {maint} |")
    zero = {v: report["variants"][v].get("retain_0") for v in variants}
    if all(zero.values()):
        lines += ["", "## Then one maintenance with an explicit 0 h retention (totals before → after)", "",
                  "| variant | active files | on disk | log | vacuumed | s |", "|---|---|---|---|---|---|"]
        for v in variants:
            t = zero[v]["tables"].values()
            pairs = [f"{sum(x[k][0] for x in t)} → {sum(x[k][1] for x in t)}" for k in ("active", "on_disk", "log")]
            lines.append(f"| {v} | " + " | ".join(pairs) + f" | {sum(x['vacuumed'] for x in t)} | {zero[v]['seconds']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--maintain-every", type=int, default=24)
    parser.add_argument("--retain-hours", type=float, default=None, help="VACUUM retention of the maintained lake")
    parser.add_argument("--messages", type=int, default=50, help="messages an hour")
    parser.add_argument("--events", type=int, default=50, help="workflow events an hour")
    parser.add_argument("--keys", type=int, default=2500, help="correlation keys over the whole period")
    parser.add_argument("--variants", default="plain,maintained,autocompact")
    parser.add_argument("--out", default=".local/many_runs")
    args = parser.parse_args()

    from correlake.config import SparkSettings
    from correlake.run import pipeline
    from correlake.run.maintenance import maintain
    from correlake.runtime.session import get_spark
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    landing = out / "landing"
    variants = args.variants.split(",")
    spark = get_spark()
    report = {"workload": vars(args), "shuffle_partitions": SparkSettings().shuffle_partitions,
              "runs_done": 0, "variants": {v: {"runs": [], "samples": [], "maintenance": []} for v in variants}}

    def save() -> None:
        for v in variants:
            report["variants"][v]["run_time"] = time_stats([r["seconds"] for r in report["variants"][v]["runs"]])
        (out / "report.json").write_text(json.dumps(report, indent=1))
        (out / "report.md").write_text(markdown(report))

    for hour in range(args.runs):
        generate(landing, args.messages, args.events, "uniform", seed=hour + 1, files=1,
                 first_position=1 + hour * POSITIONS_PER_HOUR, start_ms=BASE_MS + hour * HOUR_MS,
                 key_count=args.keys)
        for v in variants:
            lake, entry = out / v / "lake", report["variants"][v]
            with session_conf(spark, AUTO_COMPACT if v == "autocompact" else {}):
                start = time.perf_counter()
                result = pipeline.run(spark, str(landing), str(lake), max_quarantine_ratio=1.0)
                entry["runs"].append({"seconds": round(time.perf_counter() - start, 2), **result.timings})
            age_an_hour(lake)
            if (hour + 1) % args.maintain_every == 0:
                tables = measure(spark, lake)
                entry["samples"].append({"run": hour + 1, "totals": totals(tables), "tables": tables})
                if v == "maintained":
                    entry["maintenance"].append(maintenance_row(maintain(spark, str(lake), args.retain_hours)))
        report["runs_done"] = hour + 1
        print(f"run {hour + 1}/{args.runs}: " + ", ".join(
            f"{v} {report['variants'][v]['runs'][-1]['seconds']} s" for v in variants), flush=True)
        if (hour + 1) % args.maintain_every == 0:
            save()
    for v in variants:
        lake, entry = out / v / "lake", report["variants"][v]
        entry["final"] = measure(spark, lake)
        entry["retain_0"] = maintenance_row(maintain(spark, str(lake), retain_hours=0))
    save()
    print((out / "report.md").read_text())


if __name__ == "__main__":
    main()
