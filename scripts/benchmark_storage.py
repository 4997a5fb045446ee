"""Benchmark: the same workload with its landing and lake on a local disk and in object
storage, side by side in one process (one SparkSession), as a report (JSON + markdown).

    .venv/bin/python scripts/benchmark_storage.py [--messages 200000] [--events 200000]
        [--increment 0.02] [--out .local/bench-storage]

Not run by CI. The object storage is the tests' S3 server (`tests/s3server.py`: moto, in a
child process on 127.0.0.1, one request at a time), so the figures are that server's
cost as much as s3a's: a lower bound of what the move to object storage costs, not a
figure for AWS. Each layout gets a first run over the generated landing, then an
increment of `--increment` of its records in the hour after (`as_of` moves), as hourly
runs go. Needs the JARs of s3a:// (`make setup-s3`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--increment", type=float, default=0.02)
    parser.add_argument("--out", default=".local/bench-storage")
    args = parser.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"})
    sys.path.insert(0, str(ROOT / "tests"))
    from s3server import S3Server

    from correlake.lake import objectstore
    from correlake.run import pipeline
    from correlake.samples.workload import BASE_MS, HOUR_MS, generate
    from correlake.session import get_spark, use_object_store

    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    first, later = out / "landing", out / "increment"
    generate(first, args.messages, args.events, "uniform")
    n_m, n_e = int(args.messages * args.increment), int(args.events * args.increment)
    generate(later, n_m, n_e, "uniform", seed=2, first_position=10 ** 9, start_ms=BASE_MS + HOUR_MS)
    server = S3Server(out / "s3server.log")
    server.start()
    try:
        os.environ["CORRELAKE_S3_ENDPOINT"] = server.endpoint
        objectstore.client().create_bucket(Bucket="bench")
        spark = get_spark()
        use_object_store(spark)
        layouts = {"local disk": (str(out / "local-landing"), str(out / "local-lake")),
                   "object storage (moto)": ("s3a://bench/landing", "s3a://bench/lake")}
        runs = []
        for layout, (landing, lake) in layouts.items():
            for n, (label, source) in enumerate((("first run", first), (f"increment {n_m}+{n_e}", later))):
                land(source, landing, f"batch{n}")
                t = time.perf_counter()
                result = pipeline.run(spark, landing, lake, max_quarantine_ratio=1.0)
                runs.append({"layout": layout, "run": label, "total_s": round(time.perf_counter() - t, 1),
                             **result.timings})
    finally:
        server.stop()
    report = {"workload": vars(args), "runs": runs}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    lines = [f"# correlake on a local disk and in object storage: {args.messages} messages + {args.events} events",
             "", "| layout | run | total s | stages |", "|---|---|---|---|"]
    for r in runs:
        stages = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("layout", "run", "total_s"))
        lines.append(f"| {r['layout']} | {r['run']} | {r['total_s']} | {stages} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
