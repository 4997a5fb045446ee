"""The kept driver against a Spark Connect server (issue 81 item 5), by turns on two copies
of one workload. Not run by CI.

    .venv/bin/pip install -e '.[connect]'   # the Connect client's own dependencies
    .venv/bin/python scripts/connect_compare.py [--messages 20000 --events 20000] [--turns 3] \
        [--increment 0.01] [--pairs 10] [--idle 30] [--out .local/connect_compare]

Each side gets its own landing and lake of the same records: a first run of the history
(`samples/workload.generate`), then `--turns` turns, each of them, on each side (the side
that goes first alternates): the next hour's `--increment` of the history as a
`correlake run`, gold compared row for row between the two lakes (delta-rs, run ids by
their number); a micro-batch of 2 × `--pairs` records (`workload.micro_batch`, as
`bench-micro`); `correlake sql` (a SELECT on gold), `report` and `explain` on the lake.
Every command is a fresh process, timed by its wall clock (the machine's load with each).
Run it from a copy of the code that nobody edits meanwhile (`git archive HEAD`, with
PYTHONPATH=<copy>/spark): a kept driver stops once the code on disk changes.

- kept: `correlake` as cron runs it; its first call starts the kept driver (`docs/driver.md`)
  in a CORRELAKE_HOME of its own (under `--out`; the set-up's JARs and class archive).
- connect: `connect_server.py` started with correlake's session on 127.0.0.1 and a free
  port, a random token in its environment; each command is `connect_cli.py` (the CLI with
  what reaches the JVM replaced, listed there) with CORRELAKE_KEEP_DRIVER=0. `sql` cannot
  run over Connect (its read-only check walks Catalyst's plan in the JVM): its failure is
  recorded, and its statement timed without the check, labelled as such.

After the last call: each side's resident memory (driver or launcher process and its JVM,
/proc) and CPU seconds over `--idle` seconds of rest; lines of code. Writes `report.json`
and `report.md` under `--out`; stops the server and the kept driver.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CORRELAKE = str(Path(PYTHON).with_name("correlake"))
SIDES = ("kept", "connect")
SQL = "SELECT status, count(*) AS n FROM gold_messages GROUP BY status ORDER BY status"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--increment", type=float, default=0.01, help="each hour's share of the history")
    parser.add_argument("--pairs", type=int, default=10, help="a micro-batch's catch subscriptions (and messages)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of rest over which CPU is measured")
    parser.add_argument("--out", type=Path, default=ROOT / ".local" / "connect_compare")
    return parser.parse_args(argv)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def timed(command: list[str], env: dict) -> dict:
    """`command`'s wall seconds, exit code, the 1-minute load before it, and its output's last lines."""
    before = load()
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = round(time.perf_counter() - start, 2)
    tail = (done.stdout.strip().splitlines() or [""])[-1:] + (done.stderr.strip().splitlines() or [""])[-2:]
    return {"s": seconds, "rc": done.returncode, "load": before, "tail": " | ".join(filter(None, tail))[-400:],
            "path": (re.search(r", path (\w+)", done.stdout) or [None, None])[1]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sides:
    """The two sides' environments and processes: the kept driver's CORRELAKE_HOME, the Connect server."""

    def __init__(self, out: Path):
        from correlake.config import SparkSettings

        settings = SparkSettings()
        base = {**os.environ, "CORRELAKE_HOME": str(out / "home"), "CORRELAKE_JARS": str(settings.jars_dir),
                "CORRELAKE_S3_JARS": str(settings.s3_jars_dir), "TMPDIR": str(out / "tmp")}
        for folder in ("home", "tmp"):
            (out / folder).mkdir(parents=True, exist_ok=True)
        self.port, token = free_port(), secrets.token_urlsafe(32)
        self.env = {"kept": {**base, "CORRELAKE_KEEP_DRIVER": "7200"},
                    "connect": {**base, "CORRELAKE_KEEP_DRIVER": "0", "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
                                "CORRELAKE_CONNECT_URL": f"sc://localhost:{self.port}"}}
        os.environ.update(CORRELAKE_HOME=base["CORRELAKE_HOME"])  # this process lists the kept driver there
        self.server = None
        self.server_log = out / "connect_server.log"

    def start_server(self) -> float:
        """The Connect server started; seconds until it serves."""
        start = time.perf_counter()
        env = {**self.env["connect"], "CORRELAKE_CONNECT_PORT": str(self.port)}
        self.server = subprocess.Popen([PYTHON, str(ROOT / "scripts" / "connect_server.py")], env=env, cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=self.server_log.open("w"), text=True)
        if self.server.stdout.readline().strip() != "ready":
            raise SystemExit(f"the Connect server did not start: {self.server_log}")
        return round(time.perf_counter() - start, 2)

    def command(self, side: str, args: list[str]) -> list[str]:
        return [CORRELAKE, *args] if side == "kept" else [PYTHON, str(ROOT / "scripts" / "connect_cli.py"), *args]

    def pids(self, side: str) -> list[int]:
        """The side's Python process and its JVM."""
        from correlake.driver import kept
        from correlake.driver.launch import jvm_pid

        if side == "kept":
            drivers = kept.kept_drivers()
            pid = drivers[0].pid if drivers else None
        else:
            pid = self.server.pid if self.server and self.server.poll() is None else None
        return [p for p in (pid, pid and jvm_pid(pid)) if p]

    def stop(self) -> None:
        if self.server and self.server.poll() is None:
            self.server.terminate()
            self.server.wait(timeout=60)
        subprocess.run([CORRELAKE, "serve", "--stop"], env=self.env["kept"], capture_output=True, check=False)


def resident_mib(pid: int) -> float:
    rss = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS"))
    return round(int(rss.split()[1]) / 1024, 1)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def at_rest(sides: Sides, idle: float) -> dict:
    """Each side's resident MiB (process and JVM) now, and CPU seconds over `idle` seconds from now."""
    pids = {side: sides.pids(side) for side in SIDES}
    before = {side: [cpu_seconds(p) for p in ps] for side, ps in pids.items()}
    memory = {side: [resident_mib(p) for p in ps] for side, ps in pids.items()}
    time.sleep(idle)
    return {side: {"pids": pids[side], "resident_mib": memory[side],
                   "cpu_s": [round(cpu_seconds(p) - b, 2) for p, b in zip(pids[side], before[side], strict=True)]}
            for side in SIDES}


def gold_equal(lakes: dict[str, Path]) -> bool:
    """Whether the two lakes' gold tables hold the same rows (run ids by their run's number)."""
    sys.path.insert(0, str(ROOT))
    from correlake.config import GOLD_TABLES
    from correlake.lake import deltars
    from tests.support.lake_rows import lake_rows

    def rows(lake: Path) -> dict:
        runs = deltars.read(deltars.table(str(lake), "runs"), ["run_id", "started_at"]).to_pylist()
        numbers = {r["run_id"]: n for n, r in enumerate(sorted(runs, key=lambda r: r["started_at"]))}
        tables = lake_rows(str(lake), numbers)
        return {name: sorted(map(repr, tables[name] or [])) for name in GOLD_TABLES}

    kept, connect = (rows(lakes[side]) for side in SIDES)
    return kept == connect


def newest_message(lake: Path) -> int:
    from correlake.lake import deltars

    return max(deltars.read(deltars.table(str(lake), "messages"), ["message_key"]).column(0).to_pylist())


def lines_of(paths: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for path in paths for p in ([path] if path.is_file()
                                                                            else sorted(path.glob("*.py"))))


def measure(args: argparse.Namespace) -> dict:
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate, micro_batch

    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    sides = Sides(out)
    report: dict = {"workload": {k: str(v) for k, v in vars(args).items()}, "first_run": {}, "turns": []}
    landings = {side: out / f"landing-{side}" for side in SIDES}
    lakes = {side: out / f"lake-{side}" for side in SIDES}
    try:
        report["server_start_s"] = sides.start_server()
        generate(out / "history", args.messages, args.events, "uniform")
        for side in SIDES:
            shutil.copytree(out / "history", landings[side])
            report["first_run"][side] = timed(sides.command(side, [
                "run", "--landing", str(landings[side]), "--lake", str(lakes[side]), "--max-quarantine-ratio", "1"]),
                sides.env[side])
        report["first_gold_equal"] = gold_equal(lakes)
        for turn in range(args.turns):
            hour = out / f"hour-{turn}"
            generate(hour, int(args.messages * args.increment), int(args.events * args.increment), "uniform",
                     seed=100 + turn, first_position=2 * 10 ** 9 + turn * 10 ** 7,
                     start_ms=BASE_MS + (turn + 1) * HOUR_MS)
            order = SIDES if turn % 2 == 0 else SIDES[::-1]
            record: dict = {"turn": turn + 1, "order": list(order)}
            for side in order:
                for stream in ("messages", "workflow_events"):
                    shutil.copytree(hour / stream, landings[side] / stream / f"hour-{turn}")
                record.setdefault("hour", {})[side] = timed(sides.command(side, [
                    "run", "--landing", str(landings[side]), "--lake", str(lakes[side])]), sides.env[side])
            record["gold_equal"] = gold_equal(lakes)
            micro_ms = BASE_MS + (turn + 1) * HOUR_MS + HOUR_MS // 2
            for side in order:
                micro_batch(landings[side], args.pairs, 10 ** 9 + turn * 1000, micro_ms, f"micro-{turn:04d}")
                record.setdefault("micro", {})[side] = timed(sides.command(side, [
                    "run", "--landing", str(landings[side]), "--lake", str(lakes[side])]), sides.env[side])
            record["micro_gold_equal"] = gold_equal(lakes)
            key = str(newest_message(lakes["kept"]))
            for side in order:
                lake = ["--lake", str(lakes[side])]
                env = sides.env[side]
                record.setdefault("sql", {})[side] = timed(sides.command(side, ["sql", *lake, SQL]), env)
                record.setdefault("report", {})[side] = timed(sides.command(side, [
                    "report", *lake, "--out", str(out / f"report-{side}.html")]), env)
                record.setdefault("explain", {})[side] = timed(sides.command(side, [
                    "explain", *lake, "--message-key", key]), env)
            record["sql_unguarded_connect"] = timed(sides.command("connect", [
                "--unguarded-sql", "sql", "--lake", str(lakes["connect"]), SQL]), sides.env["connect"])
            report["turns"].append(record)
            write(report, out)
        report["at_rest"] = at_rest(sides, args.idle)
    finally:
        sides.stop()
    write(report, out)
    return report


def write(report: dict, out: Path) -> None:
    """report.json and report.md under `out` (after each turn: a stopped measurement keeps its turns)."""
    package = ROOT / "spark" / "correlake"
    report["lines"] = {
        "driver/": lines_of([package / "driver"]),
        "kept besides driver/ (history-key cache, table cache, heap give-back, class archive, signals)": lines_of([
            package / "caches", package / "lake" / "table_cache.py", package / "runtime" / "memory.py",
            package / "runtime" / "class_archive.py", package / "runtime" / "signals.py"]),
        "connect: server and client replacements (scripts/connect_server.py, connect_cli.py)": lines_of([
            ROOT / "scripts" / "connect_server.py", ROOT / "scripts" / "connect_cli.py"])}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text(markdown(report))


COMMANDS = ("hour", "micro", "sql", "report", "explain")


def markdown(report: dict) -> str:
    """The report as a table: per turn and command, each side's seconds (and the load before it)."""
    def cell(r: dict) -> str:
        return f"{r['s']:.1f} (load {r['load']:.0f})" + ("" if r["rc"] == 0 else f", exit {r['rc']}")

    w = report["workload"]
    lines = [f"# kept driver vs Spark Connect: {w['messages']} + {w['events']} lake, hours of {w['increment']}, "
             f"micro-batches of 2 × {w['pairs']} records", "",
             "Seconds of each fresh CLI process (1-minute load before it); connect/kept per turn.", "",
             "| turn | command | kept | connect | connect / kept | gold equal |", "|---|---|---|---|---|---|"]
    first = report["first_run"]
    if first:
        lines.append(f"| - | first run | {cell(first['kept'])} | {cell(first['connect'])} | "
                     f"{first['connect']['s'] / first['kept']['s']:.2f} | {report.get('first_gold_equal')} |")
    for t in report["turns"]:
        for command in COMMANDS:
            kept, connect = t[command]["kept"], t[command]["connect"]
            equal = {"hour": t["gold_equal"], "micro": t["micro_gold_equal"]}.get(command, "")
            lines.append(f"| {t['turn']} | {command} | {cell(kept)} | {cell(connect)} | "
                         f"{connect['s'] / kept['s']:.2f} | {equal} |")
        lines.append(f"| {t['turn']} | sql without its check (connect only) | | {cell(t['sql_unguarded_connect'])} "
                     "| | |")
    refused = {t["sql"]["connect"]["tail"] for t in report["turns"] if t["sql"]["connect"]["rc"]}
    lines += ["", f"`correlake sql` over Connect: {'; '.join(sorted(refused)) or 'ran'}", "",
              f"Connect server's start: {report.get('server_start_s')} s", ""]
    for side, rest in report.get("at_rest", {}).items():
        lines.append(f"- at rest, {side}: resident MiB {rest['resident_mib']} (process, JVM); CPU seconds over "
                     f"{w['idle']} s idle {rest['cpu_s']}")
    lines += ["", *(f"- lines, {what}: {n}" for what, n in report["lines"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    print(markdown(measure(parse_args(argv))))


if __name__ == "__main__":
    main()
