"""Benchmark: the same workload run where issue 41 moves it, as a report (JSON + markdown):
`local[2]` on a local disk, a Spark standalone cluster (a master and two 1-core workers on
this machine) on a local disk, and `local[2]` with the landing and the lake in object
storage.

    .venv/bin/python scripts/benchmark_scaleout.py [--messages 200000] [--events 200000]
        [--increment 0.02] [--out .local/bench-scaleout]

Not run by CI. Each run is a fresh `correlake run` process, as cron or a plain Airflow
task starts it (Spark's start, and on the cluster its executors', included): a first
run over the generated landing, then an increment of `--increment` of its records in the
hour after (`as_of` moves). The cluster and the object store are the tests' own
(`tests/support/cluster.py`, `tests/support/s3server.py`: moto, one request at a time), both on this
machine's 2 cores: the figures are the overhead of real executors and of a store behind
HTTP here, not a cluster's or AWS's speed. Object storage needs `make setup-s3`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORRELAKE = str(Path(sys.executable).with_name("correlake"))


def land(folder: Path, landing: str, batch: str) -> None:
    """The landing files under `folder` (<stream>/…) into `landing` as <stream>/<batch>/…."""
    from correlake.lake import objectstore

    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stream, *rest = path.relative_to(folder).parts
        key = "/".join((stream, batch, *rest))
        if landing.startswith("s3a://"):
            bucket, prefix = objectstore.split(landing)
            objectstore.client().upload_file(str(path), bucket, f"{prefix}/{key}")
        else:
            (Path(landing) / key).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(landing) / key)


def run(landing: str, lake: str, env: dict) -> dict:
    """A fresh `correlake run` process: its wall time and the stage timings it printed."""
    t = time.perf_counter()
    done = subprocess.run([CORRELAKE, "run", "--landing", landing, "--lake", lake, "--max-quarantine-ratio", "1"],
                          env=env, capture_output=True, text=True)
    wall = round(time.perf_counter() - t, 1)
    if done.returncode != 0:
        raise RuntimeError(f"correlake run failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    timings = re.search(r"timings +(.*)", done.stdout).group(1)
    return {"wall_s": wall, **{k: float(v.rstrip("s")) for k, v in (i.split(" ") for i in timings.split(", "))}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--increment", type=float, default=0.02)
    parser.add_argument("--out", default=".local/bench-scaleout")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"})
    from support.cluster import SparkCluster, private_env
    from support.s3server import S3Server

    from correlake.lake import objectstore
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate

    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    first, later = out / "landing", out / "increment"
    generate(first, args.messages, args.events, "uniform")
    n_m, n_e = int(args.messages * args.increment), int(args.events * args.increment)
    generate(later, n_m, n_e, "uniform", seed=2, first_position=10 ** 9, start_ms=BASE_MS + HOUR_MS)
    server, cluster = S3Server(out / "s3server.log"), SparkCluster(out / "cluster")
    server.start()
    cluster.start()
    try:
        os.environ["CORRELAKE_S3_ENDPOINT"] = server.endpoint
        objectstore.client().create_bucket(Bucket="bench")
        local = {**os.environ, "CORRELAKE_SPARK_MASTER": "local[2]"}
        layouts = {
            "local[2], local disk": (str(out / "disk" / "landing"), str(out / "disk" / "lake"), local),
            "cluster (2 workers × 1 core), local disk": (
                str(out / "cluster-disk" / "landing"), str(out / "cluster-disk" / "lake"),
                {**private_env(out / "cluster-driver-tmp"), "CORRELAKE_SPARK_MASTER": cluster.url}),
            "local[2], object storage": ("s3a://bench/landing", "s3a://bench/lake", local)}
        runs = []
        for layout, (landing, lake, env) in layouts.items():
            for n, (label, source) in enumerate((("first run", first), (f"increment {n_m}+{n_e}", later))):
                land(source, landing, f"batch{n}")
                runs.append({"layout": layout, "run": label, **run(landing, lake, env)})
                print(json.dumps(runs[-1]), flush=True)
    finally:
        cluster.stop()
        server.stop()
    (out / "report.json").write_text(json.dumps({"workload": vars(args), "runs": runs}, indent=2))
    lines = [f"# correlake where issue 41 moves it: {args.messages} messages + {args.events} events, "
             "fresh `correlake run` processes", "", "| layout | run | wall s | stages |", "|---|---|---|---|"]
    for r in runs:
        stages = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("layout", "run", "wall_s"))
        lines.append(f"| {r['layout']} | {r['run']} | {r['wall_s']} | {stages} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
