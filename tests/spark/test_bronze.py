"""Bronze ingestion through the real pipeline: every line accounted for, replays,
conflicts, gzip and nested folders, the quarantine-ratio gate, no-op reruns and
all-or-nothing runs."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from unittest.mock import ANY

import pytest
from deltalake import DeltaTable
from support.helpers import PythonWorkerPeak, versions, write_jsonl, write_landing
from support.lake_rows import table_rows

from correlake.config import LONG_LINE_RAW_BYTES, table_path
from correlake.contract.parsing import MAX_MILLIS
from correlake.interfaces import cli
from correlake.lake import meta
from correlake.lake.discovery import find
from correlake.lake.landing import OUTSIDE_WHY, listing
from correlake.run import pipeline, staged

T0 = 1767225600000
MARKER = "SECRET-MARKER-7f3a"  # in files outside the landing, never to be read


def m(position, key="k", **extra):
    return {"position": position, "name": "m", "correlation_key": key, "published_at": T0 + position, **extra}


def table(lake_dir, name, where=lambda row: True) -> list[dict]:
    """The rows of the lake's table `name` for which `where` holds, read with delta-rs (times as epoch millis)."""
    return [row for row in table_rows(lake_dir, name) if where(row)]


def write_inflating_gz(path, before: list, after: list, line_bytes: int = 2**30) -> None:
    """A gzip file of about 1 MiB: the `before` lines, a line of `line_bytes` bytes (one
    64 MiB member of `x` over and over: gzip's members are one stream), the `after` lines."""
    piece = gzip.compress(b"x" * (64 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(("".join(json.dumps(r) + "\n" for r in before) + '{"pad": "').encode()))
        for _ in range(line_bytes // (64 << 20)):
            f.write(piece)
        f.write(gzip.compress(('"}\n' + "".join(json.dumps(r) + "\n" for r in after)).encode()))


@pytest.fixture(scope="module")
def mixed(spark, tmp_path_factory):
    """One run over a landing with every kind of file and line: links out of the landing
    (one swapped after the run listed it), a small gzip file inflating to a 1 GiB line;
    the Python workers' peak memory measured meanwhile."""
    root = tmp_path_factory.mktemp("bronze")
    landing, lake_dir = root / "landing", str(root / "lake")
    msgs = landing / "messages"
    outside = root / "outside"  # beside the landing
    (outside / "folder").mkdir(parents=True)
    for secret in (outside / "secret.jsonl", outside / "folder" / "s.jsonl"):
        secret.write_text(json.dumps(m(99, key=MARKER)) + "\n" + MARKER + "\n")
    (msgs / "secret.jsonl").parent.mkdir(parents=True)
    (msgs / "secret.jsonl").symlink_to(outside / "secret.jsonl")
    (msgs / "all").symlink_to(outside / "folder")
    (msgs / "swapped.jsonl").symlink_to(msgs / "a.jsonl")  # in the landing when listed, then not
    write_inflating_gz(msgs / "inflating.jsonl.gz", [m(20)], [m(21)])
    write_jsonl(msgs / "a.jsonl", [m(1), m(2, extra_field={"kept": True}), "", "   ", m(3)])
    write_jsonl(msgs / "deep" / "er" / "b.jsonl", [m(4), m(1), m(5, key=7)], gz=True)  # m(1): exact replay
    write_jsonl(msgs / "c.jsonl", [m(2, key="other"), '{"position": 6, "name": "m"', m(7, ttl_ms=-5),
                                   m(10, ttl_ms=MAX_MILLIS), m(11, published_at=MAX_MILLIS + 1)])
    (msgs / "empty.jsonl").write_bytes(b"")
    (msgs / "zero.jsonl.gz").write_bytes(b"")
    (msgs / "ignored.txt").write_text("not a landing file\n")
    (msgs / "crlf.jsonl").write_bytes(json.dumps(m(8)).encode() + b"\r\n" + b"\xff\xfe\r\n")
    write_jsonl(landing / "workflow_events" / "w.jsonl", [
        {"position": 1, "type": "SUBSCRIPTION_OPENED", "timestamp": T0, "bpmn_process_id": "p",
         "process_instance_key": "i", "element_instance_key": "e", "element_type": "RECEIVE_TASK",
         "message_name": "m", "correlation_key": "k"},
        {"position": 2, "type": "TELEPORTED", "timestamp": T0},
        {"position": 3, "type": 5, "timestamp": T0},
    ])

    def listed_then_swapped(*args):
        found = find(*args)
        (msgs / "swapped.jsonl").unlink()
        (msgs / "swapped.jsonl").symlink_to(outside / "secret.jsonl")
        return found

    with pytest.MonkeyPatch.context() as patch, PythonWorkerPeak(spark) as peak:
        patch.setattr(staged, "find", listed_then_swapped)
        result = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    return spark, landing, lake_dir, result, peak.peak


def test_every_line_lands_in_bronze_or_quarantine(mixed):
    spark, _, lake_dir, result, _ = mixed
    bronze = len(table(lake_dir, "bronze_messages")) + len(table(lake_dir, "bronze_workflow_events"))
    quarantined = len(table(lake_dir, "quarantine"))
    assert result.records_read == 19 == bronze + quarantined  # blank lines are not records
    assert quarantined == result.quarantined_total == 9


def test_a_line_too_long_is_quarantined_cut_and_its_file_read_in_little_memory(mixed):
    """The 1 GiB line of a 1 MiB gzip file: its first 64 KiB in quarantine, the lines around
    it in bronze, the file ingested (a second run does not meet it: the no-op rerun below)."""
    spark, _, lake_dir, result, peak = mixed
    def source(row):
        return row["_source_file"].endswith("/inflating.jsonl.gz")

    [row] = table(lake_dir, "quarantine", source)
    assert (row["_line"], row["reason"]) == (2, "line too long")
    assert row["raw"] == '{"pad": "' + "x" * (LONG_LINE_RAW_BYTES - 9)
    assert sorted((r["position"], r["_line"]) for r in table(lake_dir, "bronze_messages", source)) == [(20, 1), (21, 3)]
    [ingested] = table(lake_dir, "ingested_files", lambda r: r["path"].endswith("/inflating.jsonl.gz"))
    assert ingested["lines"] == 3
    print(f"Python workers' peak memory: {peak / 2**20:.0f} MiB")
    assert 0 < peak < 512 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_links_out_of_the_landing_are_not_read_even_swapped_after_listing(mixed):
    from correlake.lake.landing import unread
    from correlake.run.summary import summary

    spark, landing, lake_dir, result, _ = mixed
    for name in ("bronze_messages", "quarantine"):
        assert table(lake_dir, name, lambda r: MARKER in (r["raw"] or "")
                     or re.search("/(all|secret|swapped)", r["_source_file"])) == []
    swapped = str(landing / "messages" / "swapped.jsonl")
    assert result.not_read == {swapped: OUTSIDE_WHY} and result.files == 8
    assert swapped not in [r["path"] for r in table(lake_dir, "ingested_files")]
    assert summary(result).splitlines()[-1].endswith(f"{swapped} ({OUTSIDE_WHY})")
    assert [note for note in unread(landing) if OUTSIDE_WHY in note] == [
        f"messages/all/ ({OUTSIDE_WHY})", f"messages/secret.jsonl ({OUTSIDE_WHY})",
        f"messages/swapped.jsonl ({OUTSIDE_WHY})"]


def test_a_link_swapped_between_listing_and_reading_is_not_read(spark, tmp_path):
    """The reading itself refuses it (the listing is the run's plan, made before)."""
    from correlake.transforms.bronze import parse_landing

    msgs, outside = tmp_path / "landing" / "messages", tmp_path / "outside.jsonl"
    write_jsonl(msgs / "a.jsonl", [m(1)])
    outside.write_text(json.dumps(m(2, key=MARKER)) + "\n")  # a good record: it would be in bronze
    (msgs / "b.jsonl").symlink_to(msgs / "a.jsonl")
    (msgs / "sub").mkdir()
    (msgs / "sub" / "c.jsonl").symlink_to(msgs / "a.jsonl")
    files = listing(tmp_path / "landing")[0]
    (msgs / "b.jsonl").unlink()
    (msgs / "b.jsonl").symlink_to(outside)
    shutil.rmtree(msgs / "sub")
    (msgs / "sub").symlink_to(tmp_path)  # the folder swapped: sub/c.jsonl is outside.jsonl
    (tmp_path / "c.jsonl").symlink_to(outside)
    rows = parse_landing(spark, files).collect()
    assert sorted((os.path.relpath(r["_source_file"], msgs), r["_line"], r["reason"], r["raw"]) for r in rows) == [
        ("a.jsonl", 1, None, json.dumps(m(1))), ("b.jsonl", None, OUTSIDE_WHY, None),
        ("sub/c.jsonl", None, OUTSIDE_WHY, None)]


def test_quarantine_reasons_are_precise(mixed):
    spark, _, lake_dir, result, _ = mixed
    rows = {(r["_source_file"].rsplit("/", 1)[1], r["_line"]): r for r in table(lake_dir, "quarantine")}
    assert rows[("c.jsonl", 1)]["reason"].startswith("conflicting position 2: differs from the record at ")
    assert rows[("c.jsonl", 1)]["reason"].endswith("a.jsonl:2")
    assert rows[("c.jsonl", 2)]["reason"].startswith("invalid JSON")
    assert rows[("c.jsonl", 2)]["raw"] == '{"position": 6, "name": "m"'
    assert rows[("c.jsonl", 3)]["reason"] == "negative ttl_ms"
    assert rows[("crlf.jsonl", 2)]["reason"] == "non-UTF-8 bytes at offset 0"
    assert rows[("w.jsonl", 2)]["reason"] == "unknown type 'TELEPORTED'"
    assert rows[("c.jsonl", 4)]["reason"] == "ttl_ms out of range: deadline after year 9999"
    assert rows[("c.jsonl", 5)]["reason"] == "published_at out of range"  # epoch millis past 9999-12-31
    assert rows[("w.jsonl", 3)]["reason"] == "wrong type of type"
    assert result.first_quarantined["negative ttl_ms"].endswith("/messages/c.jsonl:3")  # for the run's summary


def test_replays_are_recognised_not_duplicated(mixed):
    spark, _, lake_dir, result, _ = mixed
    assert result.replays == 1
    assert sorted(r["_is_replay"] for r in table(lake_dir, "bronze_messages", lambda r: r["position"] == 1)) == [
        False, True]
    assert len(table(lake_dir, "silver_messages")) == 8  # positions 1,2,3,4,5,8,20,21
    assert len(table(lake_dir, "messages", lambda r: r["message_key"] == 1)) == 1


def test_bronze_keeps_the_record_as_read(mixed):
    spark, _, lake_dir, _, _ = mixed
    [row] = table(lake_dir, "bronze_messages", lambda r: r["position"] == 2)
    assert json.loads(row["raw"])["extra_field"] == {"kept": True}
    assert row["_source_file"].endswith("a.jsonl") and row["_line"] == 2 and row["_run_id"]
    [five] = table(lake_dir, "bronze_messages", lambda r: r["position"] == 5)
    assert five["correlation_key"] == "7" and five["_source_file"].endswith("b.jsonl.gz")


def test_rerun_with_nothing_new_is_a_noop(mixed):
    spark, landing, lake_dir, _, _ = mixed
    before = versions(lake_dir)
    result = pipeline.run(spark, str(landing), lake_dir)
    assert result.nothing_new and versions(lake_dir) == before


@pytest.fixture(scope="module")
def later(mixed, tmp_path_factory):
    """A later run on a copy of the module's lake (whose other tests read it as the one run
    left it), its landing the later file alone (the lake's files, ingested, are not read
    again anyway): first failing after every table's write, then again. Gives the tables'
    counts before, after the failed run and after the rerun, and the rerun's result."""
    spark, _, lake_dir, _, _ = mixed
    root = tmp_path_factory.mktemp("later")
    landing, lake_dir = root / "landing", str(shutil.copytree(lake_dir, root / "lake"))
    write_jsonl(landing / "messages" / "later.jsonl", [m(3), m(4, key="changed"), m(9)])

    def counts():
        return {name: len(table(lake_dir, name)) for name in ("bronze_messages", "quarantine", "messages")}

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    before = counts()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(meta, "record_run", crash)  # after every table's write
        with pytest.raises(RuntimeError):
            pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    failed = counts()
    result = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    return lake_dir, before, failed, counts(), result


def test_a_failed_run_leaves_every_table_as_it_was(later):
    _, before, failed, after, _ = later
    assert failed == before
    assert after == {"bronze_messages": before["bronze_messages"] + 2, "quarantine": before["quarantine"] + 1,
                     "messages": before["messages"] + 1}  # m(3) a replay, m(4) a conflict, m(9) new


def test_later_run_replays_and_conflicts_against_bronze(later):
    lake_dir, _, _, _, result = later
    assert result.replays == 1
    [(reason,)] = [(r["reason"],) for r in table(lake_dir, "quarantine")
                   if r["_line"] == 2 and r["_source_file"].endswith("later.jsonl")]
    assert reason.startswith("conflicting position 4: differs from the record at") and "b.jsonl.gz:1" in reason
    assert result.quarantined == {"conflicting position: differs from the record that stands for it (each line's "
                                  "in quarantine)": 1}  # the run's summary: one count for every conflict
    assert [r["correlation_key"] for r in table(lake_dir, "messages", lambda r: r["message_key"] == 4)] == ["k"]


@pytest.fixture(scope="module")
def gated(spark, tmp_path_factory):
    """Two messages and two bad lines: a first run under the contract's default ratio, which
    the quarantine-ratio gate stops, then one allowing half the lines quarantined. (landing,
    lake, the first run's exit code, its stderr and the lake's versions after it, the second's
    exit code.) test_as_of_moves_statuses_without_new_records goes on from that lake."""
    from correlake.config import default_max_quarantine_ratio

    root = tmp_path_factory.mktemp("gated")
    landing, lake_dir = root / "landing", str(root / "lake")
    write_jsonl(landing / "messages" / "a.jsonl", [m(1, ttl_ms=1000), m(2, ttl_ms=0), "{oops", "{oops"])
    write_jsonl(landing / "workflow_events" / "a.jsonl", [])
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stderr(io.StringIO()) as err:
        env.delenv("CORRELAKE_MAX_QUARANTINE_RATIO", raising=False)
        assert default_max_quarantine_ratio() == 0.01  # the contract's default; a share equal to the ratio passes
        stopped = cli.main(["run", "--landing", str(landing), "--lake", lake_dir])
        after_stopped = versions(lake_dir)
        passed = cli.main(["run", "--landing", str(landing), "--lake", lake_dir, "--max-quarantine-ratio", "0.5"])
    return landing, lake_dir, stopped, err.getvalue(), after_stopped, passed


def test_ratio_gate_commits_nothing(gated):
    _, lake_dir, stopped, err, after_stopped, passed = gated
    assert stopped == 1
    assert re.search(r"\n +2  invalid JSON.*\(first: \S+/messages/a\.jsonl:3\)", err)
    assert "run once with a max_quarantine_ratio of 0.5 (--max-quarantine-ratio" in err
    assert all(v == -1 for v in after_stopped.values())
    assert passed == 0
    assert len(table(lake_dir, "quarantine")) == 2
    assert len(table(lake_dir, "bronze_messages")) == 2


def test_usage_errors_exit_2(tmp_path, capsys):
    assert cli.main(["run", "--landing", str(tmp_path / "missing"), "--lake", str(tmp_path)]) == 2
    (tmp_path / "a_file").write_text("")
    assert cli.main(["run", "--landing", str(tmp_path), "--lake", str(tmp_path / "a_file")]) == 2
    assert cli.main(["run", "--landing", str(tmp_path), "--lake", str(tmp_path / "a_file" / "lake")]) == 2
    assert "as the lake folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--landing", str(tmp_path), "--lake", str(tmp_path), "--as-of", "2026-01-01T00:00:00"])
    assert exc.value.code == 2
    assert "without offset" in capsys.readouterr().err
    assert cli.main(["run", "--landing", str(tmp_path), "--lake", str(tmp_path)]) == 2
    assert cli.main(["run", "--landing", str(tmp_path), "--lake", str(tmp_path / "messages" / "lake")]) == 2
    assert "cannot be the landing folder" in capsys.readouterr().err
    (tmp_path / "lake" / "_meta" / "runs" / "_delta_log").mkdir(parents=True)  # a lake given as the landing
    assert cli.main(["run", "--landing", str(tmp_path / "lake"), "--lake", str(tmp_path / "lake2")]) == 2
    assert "wrong way round" in capsys.readouterr().err and not (tmp_path / "lake2").exists()
    for name, value in (("CORRELAKE_MAX_QUARANTINE_RATIO", "abc"), ("CORRELAKE_MAX_QUARANTINE_RATIO", "5"),
                        ("CORRELAKE_SHUFFLE_PARTITIONS", "0"), ("CORRELAKE_SPARK_CONF", "no-equals-sign"),
                        ("CORRELAKE_DRIVER_MEMORY", "banana"), ("CORRELAKE_SPARK_MASTER", "bogus")):
        with pytest.MonkeyPatch.context() as env:
            env.setenv(name, value)
            assert cli.main(["run", "--landing", str(tmp_path), "--lake", str(tmp_path / "lake")]) == 2
        assert capsys.readouterr().err.startswith(f"correlake: {name}: ")
    for bad in (["run", "--landing", str(tmp_path), "--lake", str(tmp_path), "--wait", "-5"],
                ["demo", "--hours", "0"], ["demo", "--hours", "1.5"],
                ["maintain", "--lake", str(tmp_path), "--retain-hours", "20000000"],  # was an OverflowError
                ["sql", "--lake", str(tmp_path), "--out", str(tmp_path), "SELECT 1"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(bad)
        assert exc.value.code == 2


def test_what_a_run_will_not_read_is_named(tmp_path):
    from correlake.lake.landing import unread, unread_warning

    for name in ("messages/a.jsonl", "messages/2026/b.json", "messages/.c.jsonl.tmp", "messages/d.jsonl.gz",
                 "e.jsonl", "old/f.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    assert unread(tmp_path) == ["workflow_events/ (no such folder)", "e.jsonl", "old/", "messages/.c.jsonl.tmp",
                                "messages/2026/b.json"]
    assert unread_warning(tmp_path, shown=2).endswith("(no such folder), e.jsonl and 3 more")
    (tmp_path / "workflow_events").mkdir()
    (tmp_path / "e.jsonl").unlink()
    shutil.rmtree(tmp_path / "old")
    (tmp_path / "messages/2026/b.json").unlink()
    (tmp_path / "messages/.c.jsonl.tmp").unlink()
    assert unread_warning(tmp_path) is None


def test_files_a_run_cannot_read_are_named_with_why_and_read_once_they_can(tmp_path, tmp_path_factory):
    from correlake.lake.landing import unread

    msgs, away = tmp_path / "messages", tmp_path_factory.mktemp("away")  # away: out of the landing
    (away / "x.jsonl").touch()
    (msgs / "far").mkdir(parents=True)
    (msgs / "far" / "x.jsonl").symlink_to(away / "x.jsonl")  # not read, nor is what it links to
    (msgs / "all").symlink_to("/")                          # not walked
    (tmp_path / "workflow_events").symlink_to(away)        # a stream folder out of the landing
    for name in ("a.jsonl", ".b.jsonl", "_c.jsonl", "sub/d.jsonl", "../outside/e.jsonl", "_tmp/f.jsonl",
                 "sub/.staging/g.jsonl"):
        (msgs / name).parent.mkdir(parents=True, exist_ok=True)
        (msgs / name).touch()
    (msgs / "linked").symlink_to(tmp_path / "outside")      # a link to a folder of the landing is followed
    (msgs / "sub" / "loop").symlink_to(msgs)                 # each folder is read once
    (msgs / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    os.mkfifo(msgs / "pipe.jsonl")
    os.truncate(msgs / "sub" / "d.jsonl", 2**31)  # sparse: no disk taken; read as a stream, whatever its size
    for name in (b"\xff.jsonl", b"sub/\xfe/h.jsonl"):  # names Spark could not be given: every run failed
        os.makedirs(os.path.dirname(os.fsencode(msgs) + b"/" + name), exist_ok=True)
        open(os.fsencode(msgs) + b"/" + name, "w").close()
    assert [os.path.relpath(f.path, tmp_path) for f in listing(tmp_path)[0]] == [
        "messages/a.jsonl", "messages/linked/e.jsonl", "messages/sub/d.jsonl"]
    assert unread(tmp_path) == [
        "messages/.b.jsonl (hidden name: starts with . or _)", "messages/\\xff.jsonl (name not UTF-8: rename it)",
        "messages/_c.jsonl (hidden name: starts with . or _)", "messages/_tmp/ (hidden name: starts with . or _)",
        f"messages/all/ ({OUTSIDE_WHY})", "messages/dangling.jsonl (broken link)",
        f"messages/far/x.jsonl ({OUTSIDE_WHY})", "messages/pipe.jsonl (not a regular file)",
        "messages/sub/.staging/ (hidden name: starts with . or _)", "messages/sub/\\xfe/ (name not UTF-8: rename it)",
        f"workflow_events/ ({OUTSIDE_WHY})", "outside/"]


def test_unreadable_files_and_folders_are_named_not_skipped_silently(tmp_path):
    """Permissions, as a user without root's override sees them (capsh drops it when run as root)."""
    for name in ("messages/ok.jsonl", "messages/secret.jsonl", "workflow_events/locked/l.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    (tmp_path / "messages/secret.jsonl").chmod(0)
    (tmp_path / "workflow_events/locked").chmod(0)
    code = ("import sys; from correlake.lake.landing import listing, unread; "
            "print([f.path for f in listing(sys.argv[1])[0]]); print(unread(sys.argv[1]))")
    command = [sys.executable, "-c", code, str(tmp_path)]
    if os.geteuid() == 0:
        if not shutil.which("capsh"):
            pytest.skip("root without capsh: permissions are not enforced")
        command = ["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", shlex.join(command)]
    try:
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()
    finally:
        (tmp_path / "workflow_events/locked").chmod(0o755)
    assert out == [repr([str(tmp_path / "messages/ok.jsonl")]),
                   repr(["messages/secret.jsonl (Permission denied)", "workflow_events/locked/ (Permission denied)"])]


@pytest.fixture(scope="module")
def two_listings(spark, tmp_path_factory):
    """Two runs over one landing. Files that grow in place between them: a producer appends
    to a.jsonl (its last line half written when the first run read it) and a gzip member to
    b.jsonl.gz. Hidden ones (key h, positions from 101): _h1.jsonl, _staging/h3.jsonl, and
    h2.jsonl through a link into the landing (followed), renamed into next/ between the runs.
    a.jsonl grew below the stream's mark (lake.md, Discovery): the second run lists the whole
    landing. What the first run left is kept for the tests."""
    root = tmp_path_factory.mktemp("listings")
    landing, lake_dir = root / "landing", str(root / "lake")
    msgs = landing / "messages"
    a = write_jsonl(msgs / "a.jsonl", [m(1), "", m(2)])
    whole = json.dumps(m(3)) + "\n"
    with open(a, "a") as f:
        f.write(whole[:10])  # half of line 4
    b = write_jsonl(msgs / "b.jsonl", [m(10)], gz=True)
    w = write_jsonl(landing / "workflow_events" / "w.jsonl", [
        {"position": 1, "type": "SUBSCRIPTION_OPENED", "timestamp": T0, "bpmn_process_id": "p",
         "process_instance_key": "i", "element_instance_key": "e", "element_type": "RECEIVE_TASK",
         "message_name": "m", "correlation_key": "k"}])
    write_jsonl(msgs / "_h1.jsonl", [m(101, key="h")])
    write_jsonl(msgs / "_staging" / "h3.jsonl", [m(103, key="h")])  # a hidden folder: not read either
    write_jsonl(landing / "elsewhere" / "h2.jsonl", [m(102, key="h")])
    (msgs / "linked").symlink_to(landing / "elsewhere")  # in the landing: followed
    first = pipeline.run(spark, str(landing), lake_dir, max_quarantine_ratio=1.0)
    after_first = {"sizes": [a.stat().st_size, b.stat().st_size], "bronze": table(lake_dir, "bronze_messages"),
                   "ingested": [r["path"] for r in table(lake_dir, "ingested_files")]}
    with open(a, "a") as f:
        f.write(whole[10:] + json.dumps(m(4)) + "\n")
    with open(b, "ab") as f:
        f.write(gzip.compress((json.dumps(m(11)) + "\n").encode()))
    (msgs / "next").mkdir()
    (msgs / "_h1.jsonl").rename(msgs / "next" / "h1.jsonl")
    (msgs / "_staging" / "h3.jsonl").rename(msgs / "next" / "h3.jsonl")
    second = pipeline.run(spark, str(landing), lake_dir, full_listing=True)
    return landing, lake_dir, {"a": a, "b": b, "w": w, "whole": whole}, first, after_first, second


def test_a_hidden_file_or_folder_is_not_recorded_as_ingested_and_is_read_once_renamed(two_listings):
    _, lake_dir, _, _, after_first, _ = two_listings
    assert [r["position"] for r in after_first["bronze"] if r["position"] > 100] == [102]
    assert not [p for p in after_first["ingested"] if p.endswith(("/_h1.jsonl", "/h3.jsonl"))]
    assert sorted(r["position"] for r in table(lake_dir, "bronze_messages") if r["position"] > 100) == [101, 102, 103]


def test_a_file_that_grows_in_place_gives_its_new_lines_once_and_its_old_ones_not_again(spark, two_listings):
    """The grown files' new lines are read (the half line whole), none of their earlier ones
    again: each position once in bronze, no replay. (Each run also reads one hidden case's file.)"""
    landing, lake_dir, files, first, after_first, second = two_listings
    a, b, w, whole = files["a"], files["b"], files["w"], files["whole"]
    assert (first.records_read, first.quarantined_total) == (5 + 1, 1)  # the half line: invalid JSON, as read then
    assert (second.records_read, second.replays, second.quarantined_total) == (3 + 2, 0, 0)
    bronze = sorted((r["position"], r["_line"], r["_is_replay"]) for r in table(lake_dir, "bronze_messages")
                    if r["position"] < 100)
    assert bronze == [(1, 1, False), (2, 3, False), (3, 4, False), (4, 5, False), (10, 1, False), (11, 2, False)]
    assert [(r["_line"], r["raw"]) for r in table(lake_dir, "quarantine")] == [(4, whole[:10])]
    sizes = after_first["sizes"]
    lines = sorted(line for line in ((r["path"].rsplit("/", 1)[1], r["size"], r["lines"])
                                     for r in table(lake_dir, "ingested_files")) if not line[0].startswith("h"))
    assert lines == sorted([("a.jsonl", sizes[0], 3), ("a.jsonl", a.stat().st_size, 2), ("b.jsonl.gz", sizes[1], 1),
                            ("b.jsonl.gz", b.stat().st_size, 1), ("w.jsonl", w.stat().st_size, 1)])
    assert sorted(r["message_key"] for r in table(lake_dir, "messages")) == [1, 2, 3, 4, 10, 11, 101, 102, 103]
    assert [r["message_key"] for r in table(lake_dir, "correlations")] == [1]  # the first of key k
    assert pipeline.run(spark, str(landing), lake_dir).nothing_new


def test_an_unexpected_error_exits_3_not_as_a_failed_gate_here_and_on_a_driver(tmp_path, capsys, monkeypatch):
    from correlake.driver import client, protocol, server

    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        on_driver = server.portable(exc)  # as a driver sends it back
    landing = write_landing(tmp_path / "landing", [m(1)], [])  # something to run (nothing: no Spark, no driver)
    for error, code in ((RuntimeError("a bug"), 3), (on_driver, 3), (protocol.DriverError("no answer"), 2)):
        def broken(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(client, "call", broken)
        assert cli.main(["run", "--landing", str(landing), "--lake", str(tmp_path / "lake")]) == code
        err = capsys.readouterr().err
        assert ("RuntimeError: a bug" in err and "unexpected error" in err) if code == 3 else \
            err.strip().splitlines()[-1] == "correlake: no answer", err
    assert "--- driver traceback ---" in str(on_driver)


def test_a_full_disk_or_a_file_it_may_not_write_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    from correlake.driver import client

    java = ("An error occurred while calling o2564.save.\n: org.apache.spark.SparkException: Task failed\n"
            "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)\n"
            "Caused by: java.io.IOException: No space left on device\n\tat java.base/java.io.FileOutputStream")
    landing = write_landing(tmp_path / "landing", [m(1)], [])
    for error, line in ((OSError(errno.EACCES, "Permission denied", "/lake/_state/lock"),
                         "Permission denied: /lake/_state/lock"),
                        (RuntimeError(java), "java.io.IOException: No space left on device")):
        def failing(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(client, "call", failing)
        assert cli.main(["run", "--landing", str(landing), "--lake", str(tmp_path / "lake")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"correlake: {line}; nothing of the run was published") and "Traceback" not in err


def test_gzip_lines_are_read(tmp_path):
    from correlake.transforms.bronze import parse_file

    data = gzip.compress(b'{"position": 1}\n\n{"position": 2}\n')
    rows = list(parse_file("messages", "x.jsonl.gz", io.BytesIO(data)))
    assert [r["_line"] for r in rows] == [1, 3]
    assert [(r["_line"], r["raw"], r["reason"])
            for r in parse_file("messages", "bad.jsonl.gz", io.BytesIO(b"not gzip"))] == [
        (0, None, "unreadable gzip file: Error -3 while decompressing data: incorrect header check")]


@pytest.mark.parametrize("chunk", [1 << 20, 100])  # members and breaks within and across chunks
def test_a_gzip_file_that_breaks_off_gives_its_lines_up_to_there(monkeypatch, chunk):
    from correlake.transforms import bronze
    from correlake.transforms.bronze import parse_file

    monkeypatch.setattr(bronze, "_GZIP_CHUNK", chunk)

    lines = [json.dumps(m(n, variables={"pad": "x" * 100 * n})).encode() for n in range(1, 41)]
    whole = gzip.compress(b"\n".join(lines) + b"\n", mtime=0)

    def outcome(data):
        rows = list(parse_file("messages", "f.jsonl.gz", io.BytesIO(data)))
        bad = [(r["_line"], r["reason"]) for r in rows if r.get("reason")]
        return [r["position"] for r in rows if not r.get("reason")], bad

    last = gzip.compress(json.dumps(m(41)).encode())
    assert outcome(whole + b"\0\0" + last) == (list(range(1, 42)), [])  # zero padding between members
    assert outcome(gzip.compress(b"\n".join(lines[:20]) + b"\n") + gzip.compress(b"\n".join(lines[20:]))) == (
        list(range(1, 41)), [])
    assert outcome(whole + b"not gzip") == (list(range(1, 41)), [
        (41, "unreadable gzip file after line 40: Error -3 while decompressing data: incorrect header check")])
    good, bad = outcome(whole[:len(whole) * 3 // 4])
    assert good == list(range(1, len(good) + 1)) and 10 < len(good) < 40
    assert bad == [(len(good) + 1, f"unreadable gzip file after line {len(good)}: truncated (the file ends inside "
                                   "a compressed block)")]


def test_as_of_moves_statuses_without_new_records(gated, capsys):
    """Nothing new (the `gated` lake after its run: its bad lines' times count for nothing):
    statuses follow as_of, each refresh is a run recorded in _meta/runs, a dry run changes
    nothing, and the same command again is a no-op."""
    landing, lake_dir, *_ = gated
    run = ["run", "--landing", str(landing), "--lake", lake_dir]

    def statuses():
        return ({r["message_key"]: r["status"] for r in table(lake_dir, "messages")},
                [(r["as_of"],) for r in table(lake_dir, "as_of")])

    assert statuses()[0] == {1: "BUFFERED", 2: "EXPIRED"}
    assert cli.main([*run, "--as-of", str(T0 + 5000)]) == 0
    assert "re-evaluated (as_of 2026-01-01T00:00:00.002Z → 2026-01-01T00:00:05.000Z): 1 changed" in (
        capsys.readouterr().out)
    assert statuses() == ({1: "EXPIRED", 2: "EXPIRED"}, [(T0 + 5000,)])
    before = versions(lake_dir)
    assert cli.main([*run, "--dry-run"]) == 0
    assert "dry run: would re-evaluate the statuses" in capsys.readouterr().out
    assert versions(lake_dir) == before and statuses()[0] == {1: "EXPIRED", 2: "EXPIRED"}
    assert cli.main(run) == 0  # back to the default as_of
    assert "statuses of gold/messages re-evaluated" in capsys.readouterr().out
    assert statuses()[0] == {1: "BUFFERED", 2: "EXPIRED"}
    refresh = max(table(lake_dir, "runs"), key=lambda r: r["finished_at"])
    assert (refresh["files"], refresh["records_read"]) == (0, 0)
    assert json.loads(refresh["summary"])["as_of_before"] == T0 + 5000
    before = versions(lake_dir)
    assert cli.main(run) == 0
    assert "no table changed" in capsys.readouterr().out and versions(lake_dir) == before


def test_records_that_move_as_of_update_only_the_statuses_that_cross(spark, tmp_path):
    """A run whose records move as_of (later, or earlier with --as-of) restates the keys it
    touched and, of the other keys, only the rows whose status crosses (contract:
    gold/as_of), in one MERGE, and records the new as_of with its run; late records, which
    leave as_of where it was, restate their keys' rows alone and leave gold/as_of alone."""
    landing, lake_dir = tmp_path / "landing", str(tmp_path / "lake")

    def run(name, records, as_of=None):
        write_jsonl(landing / "messages" / f"{name}.jsonl", records)
        result = pipeline.run(spark, str(landing), lake_dir, as_of=as_of)
        [row] = table(lake_dir, "as_of")
        rows = [(r["message_key"], r["status"]) for r in table(lake_dir, "messages")]
        return sorted(rows), (row["as_of"], row["run_id"]), result.run_id

    *_, run_a = run("a", [m(1, key="a", ttl_ms=1000), m(2, key="e", ttl_ms=1000)])
    _, as_of_b, run_b = run("b", [m(4000, key="a", ttl_ms=10_000), m(5000, key="b", ttl_ms=1000)])
    assert as_of_b == (T0 + 5000, run_b)
    assert run("c", [m(3, key="c", ttl_ms=60_000)]) == (  # late: as_of stays, set by run b
        [(1, "EXPIRED"), (2, "EXPIRED"), (3, "BUFFERED"), (4000, "BUFFERED"), (5000, "BUFFERED")],
        (T0 + 5000, run_b), ANY)
    rows, as_of_d, run_d = run("d", [m(4, key="d", ttl_ms=0)], as_of=T0 + 3)
    assert rows == [(1, "BUFFERED"), (2, "BUFFERED"), (3, "BUFFERED"), (4, "EXPIRED"), (4000, "BUFFERED"),
                    (5000, "BUFFERED")] and as_of_d == (T0 + 3, run_d)
    history = sorted(DeltaTable(table_path(lake_dir, "messages")).history(), key=lambda c: c["version"])  # the log
    updated = {"MERGE": "numTargetRowsUpdated", "UPDATE": "numUpdatedRows"}
    assert [(c["operation"], str(c["operationMetrics"].get(updated[c["operation"]]))) for c in history[1:]] == [
        ("MERGE", "2"),  # b: key a's message 1 (touched) and key e's message 2 (crosses)
        ("MERGE", "0"),  # c: a new row, nothing crosses
        ("MERGE", "2")]  # d: a new row; messages 1 and 2 (untouched keys) back to BUFFERED
    as_of_commits = sorted(DeltaTable(table_path(lake_dir, "as_of")).history(), key=lambda c: c["version"])
    assert [c["userMetadata"] for c in as_of_commits] == [run_a, run_b, run_d]  # not c; by delta-rs


def test_reason_kinds_are_the_same_in_python_and_in_spark_sql(spark):
    from correlake.contract.reasons import reason_kind, reason_kind_sql

    reasons = ["conflicting position 4: differs from the record at /a/b's.jsonl:1", "missing field name",
               "invalid JSON: Expecting ',' delimiter: line 1 column 81 (char 80)", "invalid JSON: not an object",
               "unreadable gzip file after line 40: truncated", "unknown element_type 'x\\y $1'"]
    kinds = [reason_kind(r) for r in reasons]
    assert kinds[0] == "conflicting position: differs from the record that stands for it (each line's in quarantine)"
    assert kinds[2:5] == ["invalid JSON: Expecting ',' delimiter", "invalid JSON: not an object",
                          "unreadable gzip file after some lines: truncated"]
    frame = spark.createDataFrame([(r,) for r in reasons], "reason string")
    assert [r[0] for r in frame.selectExpr(reason_kind_sql("reason")).collect()] == kinds
