"""Benchmark: "why not correlated" on a large lake (issue 67's targets).

    .venv/bin/python scripts/benchmark_explain.py --messages 1000000 --events 1000000 \
        [--calls 3] [--out .local/bench-explain]

Not run by CI. Generates the workload (`samples/workload.generate`) and runs it with a
`correlake run`, which starts the kept driver (both skipped when `--out` holds that lake
already). Then, on the warm kept driver, each command a fresh CLI process as a user types
it, `--calls` times each: the `explanations` view over the whole lake counted by reason
and the `near_misses` view by kind (`correlake sql`), and `correlake explain` of one
message and one subscription of each reason. Writes report.json, report.md and the
stories as printed (stories.md) under `--out`, and stops the kept driver.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

CORRELAKE = str(Path(sys.executable).with_name("correlake"))
VIEW = "SELECT kind, reason, count(*) AS n FROM explanations GROUP BY kind, reason ORDER BY kind, reason"
MISSES = "SELECT kind, count(*) AS n FROM near_misses GROUP BY kind ORDER BY kind"
# one unmatched object of each kind and reason, the first by key
PICK = ("SELECT kind, reason, tenant_id, message_key, element_instance_key, message_name FROM "
        "(SELECT *, row_number() OVER (PARTITION BY kind, reason ORDER BY message_key, element_instance_key, "
        "message_name) AS n FROM explanations) WHERE n = 1 ORDER BY kind, reason")


def timed(*args: str) -> tuple[float, str]:
    """Seconds of one CLI call, end to end, and what it printed."""
    start = time.perf_counter()
    done = subprocess.run([CORRELAKE, *args], capture_output=True, text=True, check=True)
    return round(time.perf_counter() - start, 2), done.stdout


def selectors(row: dict) -> list[str]:
    if row["kind"] == "MESSAGE":
        return ["--message-key", row["message_key"]]
    return ["--element-instance-key", row["element_instance_key"], "--message-name", row["message_name"],
            "--tenant", row["tenant_id"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--out", default=".local/bench-explain")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    lake = out / f"lake-{args.messages}-{args.events}"
    report: dict = {"workload": vars(args)}
    if not (lake / "gold").exists():
        from correlake.samples.workload import generate

        generate(out / "landing", args.messages, args.events, "uniform")
        report["first_run_s"], _ = timed("run", "--landing", str(out / "landing"), "--lake", str(lake),
                                         "--max-quarantine-ratio", "1")
    lake_arg = ["--lake", str(lake)]
    timed("sql", *lake_arg, "SELECT 1")  # the kept driver warm for this lake
    for label, query in (("explanations by reason", VIEW), ("near_misses by kind", MISSES)):
        runs = [timed("sql", *lake_arg, "--limit", "100", query) for _ in range(args.calls)]
        report[label] = {"seconds": [s for s, _ in runs], "rows": runs[-1][1]}
    picked = out / "picked.csv"
    timed("sql", *lake_arg, "--out", str(picked), PICK)
    with open(picked, newline="") as f:
        objects = list(csv.DictReader(f))
    report["explain"] = []
    for row in objects:
        calls = [timed("explain", *lake_arg, *selectors(row)) for _ in range(args.calls)]
        report["explain"].append({"kind": row["kind"], "reason": row["reason"], "seconds": [s for s, _ in calls],
                                  "command": shlex.join(["correlake", "explain", *selectors(row)]), "story": calls[-1][1]})
    subprocess.run([CORRELAKE, "serve", "--stop"], capture_output=True, check=False)
    lines = [f"# why not correlated: a {args.messages} + {args.events} lake, on the kept driver, "
             f"{args.calls} calls each", ""]
    if "first_run_s" in report:
        lines.append(f"first run (starts the kept driver): {report['first_run_s']} s")
    for label in ("explanations by reason", "near_misses by kind"):
        lines += [f"`correlake sql` of {label}: {report[label]['seconds']} s", "", report[label]["rows"]]
    lines += ["| explain of | reason | seconds |", "|---|---|---|"]
    lines += [f"| {e['kind']} | {e['reason']} | {e['seconds']} |" for e in report["explain"]]
    every = [s for e in report["explain"] for s in e["seconds"]]
    if every:
        lines += ["", f"explain: median {statistics.median(every)} s, max {max(every)} s"]
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    (out / "stories.md").write_text("".join(f"## {e['kind']} {e['reason']}\n\n    $ {e['command']}\n"
                                            + "".join(f"    {line}\n" for line in e["story"].splitlines()) + "\n"
                                            for e in report["explain"]))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
