"""`correlake demo`: write a sample landing and run the pipeline on it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from correlake.config import demo_dir
from correlake.errors import EXIT_OK, UsageError
from correlake.interfaces import options
from correlake.interfaces.commands import run


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("demo", help="write a sample landing and run the pipeline on it")
    parser.add_argument("--dir", default=str(demo_dir()), help="demo folder (landing/ and lake/); default %(default)s")
    parser.add_argument("--hours", type=options.positive, default=3, help="hours of sample traffic; default %(default)s")
    parser.add_argument("--seed", type=int, default=7, help="seed of the sample traffic; default %(default)s")
    parser.add_argument("--deliver", action="store_true",
                        help="then deliver the correlations to the example webhook receiver, started on 127.0.0.1")
    return parser


def main(args: argparse.Namespace) -> int:
    from correlake.driver import client
    from correlake.run.summary import findings
    from correlake.samples.demo import write_demo_landing

    root = Path(args.dir).resolve()
    landing, lake_dir = root / "landing", root / "lake"
    _same_demo(root, {"hours": args.hours, "seed": args.seed})
    counts = write_demo_landing(landing, hours=args.hours, seed=args.seed)
    print(f"demo landing: {landing} ({counts['messages']} messages, {counts['workflow_events']} workflow events, "
          f"{counts['bad']} bad lines)")
    code = run.execute(str(landing), str(lake_dir))
    if code == EXIT_OK:
        print(client.call(findings, str(lake_dir)))
        print(f"demo lake: {lake_dir} (its views: ./correlake sql --lake {lake_dir} --list)")
        if args.deliver:
            _deliver(root, str(lake_dir))
    return code


def _deliver(root: Path, lake: str) -> None:
    """A delivery pass to `examples/consumers/webhook_receiver.py`, run for the pass on a
    free loopback port with its ledger in the demo folder (docs/delivery.md)."""
    import os
    import sqlite3
    import subprocess
    import sys

    from correlake.config import WEBHOOK_SECRET_ENV, data_dir, secret
    from correlake.delivery import deliver as delivery
    from correlake.delivery.sinks import open_sink

    ledger, signing = root / "receiver.sqlite", secret(WEBHOOK_SECRET_ENV)
    receiver = subprocess.Popen([sys.executable, str(data_dir("examples/consumers") / "webhook_receiver.py"),
                                 str(ledger), "--port", "0"], stderr=subprocess.PIPE, text=True,
                                env={**os.environ, WEBHOOK_SECRET_ENV: signing or ""})  # both sign, or neither
    try:
        url = receiver.stderr.readline().split()[3]  # "webhook receiver on http://127.0.0.1:<port>/ (…)"
        with open_sink("webhook", url, signing) as sink:
            result = delivery.deliver(lake, sink, delivery.Settings())
    finally:
        receiver.terminate()
        receiver.wait()
    print(delivery.summary(result))
    with sqlite3.connect(ledger) as conn:
        applied = conn.execute("SELECT count(*) FROM processed").fetchone()[0]
    print(f"demo receiver: {applied} events applied, each once (its ledger: {ledger}; the delivery views: "
          f"./correlake sql --lake {lake} 'SELECT * FROM delivery_by_hour')")


def _same_demo(root: Path, params: dict) -> None:
    """A demo folder holds one demo: the same again is a no-op; other hours or another seed
    would rewrite its files with other records at the same positions (conflicts)."""
    record = root / "demo.json"
    if record.exists():
        held = json.loads(record.read_text())
        if held != params:
            def flags(p):
                return f"--hours {p['hours']} --seed {p['seed']}"
            raise UsageError(f"{root} holds the demo of {flags(held)}; for {flags(params)} give another --dir "
                             "(or remove that folder)")
    else:
        root.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(params))
