"""Shared test helpers: landing files, reading gold, combining cases by tenant, data files moved away."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

from correlake.config import GOLD_TABLES, TABLES, table_path
from correlake.contract.records import parse_line
from correlake.contract.schemas import GOLD
from correlake.driver import launch
from correlake.lake import tables as lake

START_KEY = re.compile(r"^msg-start:(.*):(-?\d+)$")


def write_jsonl(path: Path, records: list, gz: bool = False) -> Path:
    import gzip

    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode()
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def write_landing(root: Path, messages: list, events: list, name: str = "part") -> Path:
    write_jsonl(root / "messages" / f"{name}.jsonl", messages)
    write_jsonl(root / "workflow_events" / f"{name}.jsonl", events)
    return root


def publish(position: int, key: str, at: int) -> dict:
    """A publish of message `m` with `key` at `at` (epoch ms), the contract's fields only."""
    return {"position": position, "name": "m", "correlation_key": key, "published_at": at}


def opened(position: int, key: str, at: int) -> dict:
    """A receive task of process `p` (instance i<position>, element e<position>) waiting for `m` with `key`."""
    return {"position": position, "type": "SUBSCRIPTION_OPENED", "timestamp": at, "bpmn_process_id": "p",
            "process_instance_key": f"i{position}", "element_instance_key": f"e{position}",
            "element_type": "RECEIVE_TASK", "message_name": "m", "correlation_key": key}


def compilations(spark) -> int:
    """How many generated classes Spark's JVM has compiled so far (its codegen cache's misses)."""
    return spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def versions(lake_dir: str) -> dict[str, int]:
    """Every lake table's latest Delta version (-1: no table)."""
    return {name: lake.version(table_path(lake_dir, name)) for name in TABLES}


def read_gold(lake: str) -> dict[str, list[dict]]:
    """Every gold table as dicts, and gold/as_of's instant (not the run that set it) as `as_of`;
    timestamps as epoch millis. Read with delta-rs, no Spark job (`lake_rows.table_rows`)."""
    from .lake_rows import table_rows

    out = {name: table_rows(lake, name, lambda _, name=name: GOLD[name].fieldNames()) for name in GOLD_TABLES}
    out["as_of"] = table_rows(lake, "as_of", lambda _: ["as_of"])
    assert None not in out.values(), f"{lake} lacks gold tables: {[n for n, rows in out.items() if rows is None]}"
    return out


def sorted_gold(lake: str) -> dict[str, list[str]]:
    """Every gold table as its sorted rows (JSON): equal for equal contents in any order."""
    return {table: sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)
            for table, rows in read_gold(lake).items()}


def as_revision_1(spark, lake: str) -> None:
    """The lake as contract revision 1 left it: gold/as_of's instant on every gold/messages row."""
    from pyspark.sql import functions as F

    as_of = spark.read.format("delta").load(table_path(lake, "as_of")).first()["as_of"]
    messages = spark.read.format("delta").load(table_path(lake, "messages")).withColumn("as_of", F.lit(as_of))
    messages.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
        table_path(lake, "messages"))
    shutil.rmtree(table_path(lake, "as_of"))


def iso_to_millis(text: str | None) -> int | None:
    if text is None:
        return None
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def millis_to_iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parsed(stream: str, records: list[dict]) -> list[dict]:
    """Distinct parsed records of a stream (exact replays collapsed: first one stands)."""
    seen, out = set(), []
    for r in records:
        rec = parse_line(stream, json.dumps(r).encode())
        if rec["position"] not in seen:
            seen.add(rec["position"])
            out.append(rec)
    return out


def relabel(records: list[dict], tenant: str, offset: int, shift_ms: int = 0,
            time_field: str | None = None) -> list[dict]:
    """A case's records moved to its own tenant prefix, position range and time."""
    out = []
    for r in records:
        r = dict(r)
        r["position"] = r["position"] + offset
        r["tenant_id"] = f"{tenant}|{r.get('tenant_id') or '<default>'}"
        for k in ("process_instance_key", "element_instance_key"):
            if isinstance(r.get(k), str):
                m = START_KEY.match(r[k])
                if m:
                    r[k] = f"msg-start:{m.group(1)}:{int(m.group(2)) + offset}"
        if shift_ms and time_field in r:
            value = r[time_field]
            r[time_field] = (value + shift_ms if isinstance(value, int)
                             else millis_to_iso(iso_to_millis(value) + shift_ms))
        out.append(r)
    return out


def latest_time(case: dict) -> int:
    """The latest event time of a case's records (epoch millis)."""
    return max([iso_to_millis(m["published_at"]) if isinstance(m["published_at"], str) else m["published_at"]
                for m in case["messages"]] +
               [iso_to_millis(e["timestamp"]) if isinstance(e["timestamp"], str) else e["timestamp"]
                for e in case["workflow_events"]])


def merge_cases(cases: list[dict], offset: int) -> tuple[list, list, dict]:
    """Cases in one landing: case i (from 1) under tenant prefix c{i:02d}, its positions moved
    by i * `offset`, its times shifted so that every case's latest record falls at one instant
    (the default as_of); (messages, workflow events, {tag: (its offset, its shift, how many
    records of each stream come before its own)})."""
    target = max(latest_time(case) for case in cases)
    messages, events, layout = [], [], {}
    for i, case in enumerate(cases, start=1):
        tag, shift = f"c{i:02d}", target - latest_time(case)
        layout[tag] = (i * offset, shift, {"messages": len(messages), "workflow_events": len(events)})
        messages += relabel(case["messages"], tag, i * offset, shift, "published_at")
        events += relabel(case["workflow_events"], tag, i * offset, shift, "timestamp")
    return messages, events, layout


def restore_row(row: dict, offset: int, shift: int) -> dict:
    """A gold row of a case relabelled by `relabel` (its tenant prefix, position offset and
    time shift), as the case itself would have it."""
    row = dict(row)
    row["tenant_id"] = row["tenant_id"].split("|", 1)[1]
    for k in ("message_key", "duplicate_of"):
        if row.get(k) is not None:
            row[k] -= offset
    for k in ("correlated_at", "message_published_at", "published_at", "deadline", "opened_at", "closed_at",
              "started_at", "ended_at", "as_of"):
        if row.get(k) is not None:
            row[k] -= shift
    if row.get("process_instance_key"):
        m = START_KEY.match(row["process_instance_key"])
        if m:
            row["process_instance_key"] = f"msg-start:{m.group(1)}:{int(m.group(2)) - offset}"
    return row


def project_row(row: dict, columns: list[str], from_expected: bool) -> tuple:
    """A row on `columns`, an expected row's times (ISO-8601) as epoch millis."""
    out = []
    for c in columns:
        v = row.get(c)
        if from_expected and isinstance(v, str) and c.endswith(("_at", "deadline", "as_of")):
            v = iso_to_millis(v)
        out.append((c, v))
    return tuple(out)


def project(rows: list[dict], columns) -> list:
    return sorted((tuple(sorted((k, v) for k, v in r.items() if columns is None or k in columns)) for r in rows),
                  key=repr)


def canonical_rows(rows: list[dict]) -> list[tuple]:
    """Rows as sorted tuples, `variables` (JSON text or a JSON value) as canonical JSON text."""
    def canon(v):
        return json.dumps(json.loads(v) if isinstance(v, str) else v, sort_keys=True)

    return project([dict(r, variables=canon(r["variables"])) if "variables" in r else r for r in rows], None)


def assert_gold_equals(got: dict, want: dict) -> None:
    """Gold (`read_gold`) equals the reference model's (`reference_model.reference`) on every column."""
    if "as_of" in got and got["messages"]:
        assert got["as_of"] == [{"as_of": want["as_of"]}], (got["as_of"], want["as_of"])
    for table in GOLD_TABLES:
        g, w = canonical_rows(got[table]), canonical_rows(want[table])
        if g != w:
            tenants = sorted({dict(r)["tenant_id"] for r in set(g) ^ set(w)})
            raise AssertionError(f"gold/{table} differs from the reference model for tenants {tenants[:5]}:\n"
                                 f"  only in gold: {sorted(set(g) - set(w), key=repr)[:4]}\n"
                                 f"  only in model: {sorted(set(w) - set(g), key=repr)[:4]}")


def listening_addresses(pid: int) -> list:
    """The addresses process `pid` listens on (its LISTEN TCP sockets, IPv4 and IPv6; an
    IPv4-mapped IPv6 address as its IPv4 one), read from /proc."""
    def link(fd: str) -> str:
        try:
            return os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed since the listing (a starting process opens and closes files)
            return ""

    links = (link(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    sockets = {name[len("socket:["):-1] for name in links if name.startswith("socket:[")}
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # every socket of the network namespace
        for line in Path(table).read_text().splitlines()[1:]:
            local, state, inode = (line.split()[i] for i in (1, 3, 9))
            if state == "0A" and inode in sockets:  # LISTEN, of this process
                address = bytes.fromhex(local.partition(":")[0])  # 32-bit words, each little-endian
                ip = ipaddress.ip_address(b"".join(address[i:i + 4][::-1] for i in range(0, len(address), 4)))
                listening.append(getattr(ip, "ipv4_mapped", None) or ip)
    return listening


def flock_waiters(path: Path) -> int:
    """How many `flock`s wait for `path` (the kernel's /proc/locks lists each waiter with "->")."""
    inode = f":{path.stat().st_ino} "
    return sum(1 for line in Path("/proc/locks").read_text().splitlines() if "->" in line and inode in line)


def start_driver(root: Path) -> tuple[subprocess.Popen, Path, Path]:
    """A `correlake serve` process (no warm-up, 1 GB heap), once it serves: (process, socket, log file)."""
    address, log = root / "driver.sock", root / "driver.log"
    process = launch.spawn(address, log, warm_up_rounds=0, env={**os.environ, "CORRELAKE_DRIVER_MEMORY": "1g"},
                           timeout=180)
    return process, address, log


class PythonWorkerPeak:
    """The peak resident memory (bytes) of the Python workers of a SparkSession's JVM while
    a `with` block runs: their high-water marks reset at its start (Linux's
    /proc/<pid>/clear_refs), then read every `interval` seconds, workers forked meanwhile
    included. `peak` is set when the block ends."""

    def __init__(self, spark, interval: float = 0.1):
        self.jvm, self.interval, self.peak = spark.sparkContext._gateway.proc.pid, interval, 0
        self._stop, self._thread = threading.Event(), None

    def _workers(self) -> list[int]:
        parents = {}
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    parents[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (ValueError, OSError):
                continue

        def under_jvm(pid: int) -> bool:
            while pid > 1:
                pid = parents.get(pid, 0)
                if pid == self.jvm:
                    return True
            return False

        modules = {b"pyspark.daemon", b"pyspark.worker"}  # not the JVM's own forks (Hadoop's readlink)
        return [pid for pid in parents if under_jvm(pid) and modules & set(_read(f"/proc/{pid}/cmdline").split(b"\0"))]

    def _read_peaks(self) -> None:
        for pid in self._workers():
            for line in _read(f"/proc/{pid}/status").splitlines():
                if line.startswith(b"VmHWM:"):  # a high-water mark: workers live on between polls
                    self.peak = max(self.peak, int(line.split()[1]) * 1024)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._read_peaks()
            self._stop.wait(self.interval)
        self._read_peaks()

    def __enter__(self):
        for pid in self._workers():
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def lock_takers_that_won(lake: str, takers: int) -> list[int]:
    """Race `takers` threads, released at once, to take the lake's (stale) run lock: the
    numbers of those that took it (each writes {"pid": its number})."""
    from correlake.lake import lock

    start, winners = threading.Barrier(takers), []

    def take(n):
        start.wait()
        if lock._take(lake, json.dumps({"pid": n, "host": "h", "started": time.time()}))[0]:
            winners.append(n)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(takers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return winners


@contextmanager
def moved_away(uris: list[str], aside: Path):
    """The local files of `uris` (a table's data files as Spark or delta-rs name them) moved
    into the folder `aside` for the block, then back: a read of one of them fails meanwhile."""
    paths = [unquote(urlparse(uri).path) for uri in uris]
    for i, path in enumerate(paths):
        os.rename(path, aside / str(i))
    try:
        yield
    finally:
        for i, path in enumerate(paths):
            os.rename(aside / str(i), path)
