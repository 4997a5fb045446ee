"""Many small hourly runs in one process: Delta file counts with and without maintenance.

    .venv/bin/python scripts/many_runs.py [--runs 200] [--maintain-every 24] [--retain-hours H]
        [--messages 50] [--events 50] [--keys 2500] [--variants plain,maintained,autocompact]
        [--out .local/many_runs]

Not run by CI. One SparkSession (one warm process, as on the kept driver). Each hour, an
increment (`correlake.samples.workload.generate`)
lands and every variant's lake runs the pipeline on it, interleaved so that they share
the machine's load:
  plain        no maintenance;
  maintained   `correlake maintain` every --maintain-every runs (VACUUM at --retain-hours,
               default Delta's 168 h, which removes nothing in a lake younger than that);
  autocompact  no maintenance, Delta's optimized writes and auto compaction on (session conf).
After each run every file of each lake's tables is dated an hour earlier, so that the
retentions counted in hours (VACUUM's, the log's: `delta.logRetentionDuration`) act as on
a lake run once an hour. Every --maintain-every runs (before and after maintaining) and at
the end, each lake is measured without Spark: per table the active data files (Delta
snapshot, through delta-rs), the files on disk, `_delta_log`'s commits, checkpoint files and
all its files; per folder of the lake (`_meta`, `_state`, `_quality`, …) files and bytes.
At the end every lake gets one maintenance with an explicit 0 h retention (with
--retain-hours 0 the maintained lake's own, at its last run), measured after. Writes
report.json and report.md under --out (rewritten at every measurement).
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


def measure(lake: Path) -> dict:
    """Per table: active data files, files on disk (data and deletion vectors), `_delta_log`'s
    files, commits and checkpoint files; per folder of the lake: files and bytes."""
    from correlake.config import TABLES
    from correlake.lake import deltars

    tables = {}
    for name, relative in TABLES.items():
        path = lake / relative
        if not (path / "_delta_log").is_dir():
            continue
        on_disk = [p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")]
        log = [p.name for p in on_disk if p.relative_to(path).parts[0] == "_delta_log"]
        tables[relative] = {"active": deltars.detail(str(lake), name).files, "on_disk": len(on_disk) - len(log),
                            "log": len(log), "commits": sum(n.endswith(".json") for n in log),
                            "checkpoints": sum(".checkpoint." in n for n in log)}
    folders = {}
    for top in sorted(p for p in lake.iterdir() if p.is_dir()):
        found = [p.stat().st_size for p in top.rglob("*") if p.is_file()]
        folders[top.name] = {"files": len(found), "bytes": sum(found)}
    return {"tables": tables, "folders": folders}


def age_an_hour(lake: Path) -> None:
    """Every file of the lake's tables (data and log) dated an hour earlier: the next run is an hour later."""
    from correlake.config import TABLES

    for relative in TABLES.values():
        for path in (lake / relative).rglob("*"):
            if path.is_file():
                st = path.stat()
                os.utime(path, ns=(st.st_atime_ns - 3600 * 10 ** 9, st.st_mtime_ns - 3600 * 10 ** 9))


KINDS = ("active", "on_disk", "commits", "checkpoints", "log")


def totals(measured: dict) -> dict:
    return {k: sum(t[k] for t in measured["tables"].values()) for k in KINDS}


def sample(run: int, lake: Path) -> dict:
    measured = measure(lake)
    return {"run": run, "totals": totals(measured), **measured}


def time_stats(seconds: list[float]) -> dict:
    if not seconds:
        return {}
    ordered = sorted(seconds)
    return {"mean": round(statistics.mean(seconds), 1), "median": round(statistics.median(seconds), 1),
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1), "max": round(ordered[-1], 1),
            "first_24_mean": round(statistics.mean(seconds[:24]), 1),
            "last_24_mean": round(statistics.mean(seconds[-24:]), 1)}


def cell(values: dict, keys=KINDS) -> str:
    return " / ".join(str(values[k]) for k in keys)


def compared(samples: list[dict]) -> list[dict]:
    """The samples of the first and the last two measured runs: the growth between them."""
    runs = sorted({s["run"] for s in samples})
    keep = {runs[0], *runs[-2:]}
    return [s for s in samples if s["run"] in keep]


def markdown(report: dict) -> str:
    w, variants = report["workload"], list(report["variants"])
    lines = [f"# correlake: {report['runs_done']} hourly runs ({w['messages']} messages + {w['events']} workflow "
             f"events an hour, {w['keys']} keys), maintenance every {w['maintain_every']} runs", "",
             f"Shuffle partitions {report['shuffle_partitions']}; VACUUM retention of the maintained lake: "
             f"{w['retain_hours'] if w['retain_hours'] is not None else '168 (Delta default)'} h. "
             "Cells: active (data files of the current Delta snapshot) / on disk (data and deletion-vector "
             "files, active and replaced not yet vacuumed) / commits (`_delta_log` JSON) / checkpoint files "
             "/ all `_delta_log` files. Before and after: that run's maintenance (the last: 0 h retention).", "",
             "## Totals over time", "", "| after run | " + " | ".join(variants) + " |",
             "|---|" + "---|" * len(variants)]
    points = sorted({(s["run"], s["stage"]) for v in variants for s in report["variants"][v]["samples"]},
                    key=lambda point: (point[0], point[1] != "before"))
    for run, stage in points:
        cells = [next((cell(s["totals"]) for s in report["variants"][v]["samples"]
                       if (s["run"], s["stage"]) == (run, stage)), "") for v in variants]
        lines.append(f"| {run} {stage} | " + " | ".join(cells) + " |")
    for v in variants:
        chosen = compared(report["variants"][v]["samples"])
        if not chosen:
            continue
        heads = [f"run {s['run']} {s['stage']}" for s in chosen]
        lines += ["", f"## {v}: per table", "", "| table | " + " | ".join(heads) + " |",
                  "|---|" + "---|" * len(heads)]
        for table in chosen[-1]["tables"]:
            lines.append(f"| {table} | " + " | ".join(cell(s["tables"][table]) if table in s["tables"] else ""
                                                       for s in chosen) + " |")
        lines.append("| **total** | " + " | ".join(f"**{cell(s['totals'])}**" for s in chosen) + " |")
        lines += ["", f"## {v}: folders of the lake (files / KB)", "", "| folder | " + " | ".join(heads) + " |",
                  "|---|" + "---|" * len(heads)]
        for folder in chosen[-1]["folders"]:
            lines.append(f"| {folder} | " + " | ".join(
                f"{f['files']} / {f['bytes'] // 1024}" if (f := s["folders"].get(folder)) else ""
                for s in chosen) + " |")
    lines += ["", "## Time per run (s)", "", "| variant | mean | median | p90 | max | first 24 | last 24 | "
              "load (1 min, mean) | maintenance (mean s, count) |", "|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        entry = report["variants"][v]
        s, m = entry["run_time"], entry["maintenance"]
        load = round(statistics.mean(r["load"] for r in entry["runs"]), 1) if entry["runs"] else "–"
        maint = f"{round(statistics.mean(x['seconds'] for x in m), 1)}, {len(m)}" if m else "–"
        lines.append(f"| {v} | {s.get('mean')} | {s.get('median')} | {s.get('p90')} | {s.get('max')} | "
                     f"{s.get('first_24_mean')} | {s.get('last_24_mean')} | {load} | {maint} |")
    return "\n".join(lines) + "\n"


def maintained(spark, lake: Path, retain_hours: float | None, run: int) -> dict:
    from correlake.run.maintenance import maintain

    result = maintain(spark, str(lake), retain_hours)
    return {"run": run, "seconds": result.seconds, "retain_hours": retain_hours,
            "compacted": sum(t.compacted for t in result.tables), "vacuumed": sum(t.vacuumed for t in result.tables)}


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

    def maintain_and_sample(v: str, lake: Path, run: int, retain_hours: float | None, stage: str) -> None:
        entry = report["variants"][v]
        entry["maintenance"].append(maintained(spark, lake, retain_hours, run))
        entry["samples"].append({**sample(run, lake), "stage": stage})

    for hour in range(args.runs):
        generate(landing, args.messages, args.events, "uniform", seed=hour + 1, files=1,
                 first_position=1 + hour * POSITIONS_PER_HOUR, start_ms=BASE_MS + hour * HOUR_MS,
                 key_count=args.keys)
        for v in variants:
            lake, entry = out / v / "lake", report["variants"][v]
            with session_conf(spark, AUTO_COMPACT if v == "autocompact" else {}):
                start = time.perf_counter()
                result = pipeline.run(spark, str(landing), str(lake), max_quarantine_ratio=1.0)
                entry["runs"].append({"seconds": round(time.perf_counter() - start, 2), "load": os.getloadavg()[0],
                                      **result.timings})
            age_an_hour(lake)
            if (hour + 1) % args.maintain_every == 0:
                entry["samples"].append({**sample(hour + 1, lake), "stage": "before"})
                if v == "maintained":
                    maintain_and_sample(v, lake, hour + 1, args.retain_hours, "after")
        report["runs_done"] = hour + 1
        print(f"run {hour + 1}/{args.runs}: " + ", ".join(
            f"{v} {report['variants'][v]['runs'][-1]['seconds']} s" for v in variants), flush=True)
        if (hour + 1) % args.maintain_every == 0:
            save()
    for v in variants:
        lake, entry = out / v / "lake", report["variants"][v]
        if args.runs % args.maintain_every:
            entry["samples"].append({**sample(args.runs, lake), "stage": "before"})
        maintain_and_sample(v, lake, args.runs, 0, "after 0 h")
    save()
    print((out / "report.md").read_text())


if __name__ == "__main__":
    main()
