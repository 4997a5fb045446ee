"""The conformance scenarios and the project's own cases as a Zeebe broker would export them
(contract revision 4, *Zeebe exporter records*), through the real pipeline.

Every scenario of tests/data that the exporter records can express (support/zeebe_export.py:
`unfaithful` names those they cannot, an element or instance end in the millisecond of a
message of its tenant: the engine writes the end after the message, the canonical order
before), and test_pipeline_cases.py's records of both its runs (its tenant `reserved` left
out: its `msg-start:` keys name no instance a message starts, which no engine key can say),
each under its own tenant prefix, position range and time shift (as test_conformance.py's
merged pass), converted at once into one export: three partitions (a case's instances on its
tenant's partition, messages on their key's), two unmapped records (jobs, variables, commands,
rejections…) per mapped one, the engine's CORRELATED records of the expected correlations.
Each partition's records are written in two files, the second gzipped, one partition's as
Elasticsearch search hits. One run on Spark's path. Each case's gold must hold exactly its
expected rows (a scenario's `expected`, the pipeline case's from the reference model) with
the instance keys and element ids renamed as the export names them; nothing is
quarantined, every line is in bronze, no record stays unmapped, and the audit finds no
difference but what the engine's pairings of instances that never start make (the export
writes them so that the records naming such an instance name it as correlake does).

The same run holds a bad case (tenant `<default>`, partition 9, support/zeebe_bad.py): BPMN
that would read a FIFO outside the landing (an external entity, an external DTD) or expand an
entity bomb, subscriptions of a send task, a message start event and a missing element: each
listed in `unmapped_engine_records`, none opened, nothing read outside the landing (a watcher
of the FIFO tells whether anything opened it, with no timing involved), the run completes."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from support import zeebe_bad
from support.helpers import merge_cases, project_row, read_gold, restore_row, write_jsonl
from support.lake_rows import table_rows
from support.reference_model import reference
from support.zeebe_export import convert, identity, unfaithful, valid
from test_pipeline_cases import RUN_1, RUN_2

from correlake.config import ENGINE_STREAM, GOLD_TABLES
from correlake.interfaces import cli
from correlake.lake import catalog

DATA = Path(__file__).parents[1] / "data"
SCENARIOS = sorted(DATA.glob("conformance/*.json")) + sorted(DATA.glob("scenarios/*.json"))
OFFSET = 100_000
PARTITIONS = 3
HITS = 2  # the partition whose records are written as search hits
BAD_PARTITION = 9  # the bad case's records (support/zeebe_bad.py)


def pipeline_case() -> dict:
    """test_pipeline_cases' records of both runs but its tenant `reserved` and its quarantined
    line (whose later time would move the case's default as_of), exact replays kept; its
    expected gold is the reference model's."""
    streams = {}
    for stream, records in (("messages", RUN_1[0] + RUN_2[0]), ("workflow_events", RUN_1[1] + RUN_2[1])):
        records = [json.loads(r) if isinstance(r, str) else r for r in records]  # a replay as text
        first = {r["position"]: r for r in valid(stream, records)[0]}
        streams[stream] = [r for r in records if first.get(r["position"]) == r and r.get("tenant_id") != "reserved"]
    return dict(streams, expected=reference(valid("messages", streams["messages"])[0],
                                            valid("workflow_events", streams["workflow_events"])[0]))


def cases() -> tuple[dict, list[str]]:
    """{name: case} of the convertible cases, and the names of the others."""
    every = {p.stem: json.loads(p.read_text()) for p in SCENARIOS} | {"pipeline_cases": pipeline_case()}
    left_out = sorted(n for n, c in every.items() if unfaithful(c["messages"], c["workflow_events"]))
    return {n: c for n, c in every.items() if n not in left_out}, left_out


CASES, LEFT_OUT = cases()


def write(landing: Path, records: list[dict]) -> None:
    """Each partition's records in two files, the second gzipped; partition HITS's as search hits."""
    for p in range(1, PARTITIONS + 1):
        lines = [r if p != HITS else {"_index": f"zeebe-record_{r['valueType'].lower()}_8.8.0_2026-01-01",
                                      "_id": f"{p}-{r['position']}", "_source": r}
                 for r in records if r["partitionId"] == p]
        half = len(lines) // 2
        write_jsonl(landing / ENGINE_STREAM / f"partition-{p}" / "a.jsonl", lines[:half])
        write_jsonl(landing / ENGINE_STREAM / f"partition-{p}" / "b.jsonl", lines[half:], gz=True)


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    print(f"left out, not convertible: {LEFT_OUT}")
    root = tmp_path_factory.mktemp("engine_conformance")
    messages, events, layout = merge_cases(list(CASES.values()), OFFSET)
    export = convert(messages, events, partitions=PARTITIONS, noise=2, engine_correlations=True, seed=82)
    write(root / "landing", export.records)
    secret = root / "outside" / "secret.fifo"  # beside the landing, not in it
    secret.parent.mkdir()
    os.mkfifo(secret)
    bad = zeebe_bad.records(zeebe_bad.definitions(str(secret)), BAD_PARTITION)
    write_jsonl(root / "landing" / ENGINE_STREAM / "bad.jsonl", bad)
    lake, watcher = str(root / "lake"), zeebe_bad.Watcher(str(secret))
    watcher.start()
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("CORRELAKE_RUN_PATH", "spark")
            assert cli.main(["run", "--landing", str(root / "landing"), "--lake", lake]) == 0
    finally:
        watcher.stop()
    catalog.register(spark, lake, ["unmapped_engine_records", "engine_differences"])
    views = {name: [r.asDict() for r in spark.sql(f"SELECT * FROM {name}").collect()]
             for name in ("unmapped_engine_records", "engine_differences")}
    replays = Counter(r["_is_replay"] for r in table_rows(lake, "bronze_engine_records", lambda _: ["_is_replay"]))
    return {"gold": read_gold(lake), "layout": layout, "export": export, "views": views, "bad": bad,
            "records": export.records + bad, "fifo_opened": watcher.opened,
            "quarantined": len(table_rows(lake, "quarantine", lambda _: ["reason"])), "bronze": replays}


@pytest.mark.parametrize("name", list(CASES))
def test_case(run, name):
    tag = f"c{list(CASES).index(name) + 1:02d}"
    offset, shift, _ = run["layout"][tag]
    expected_gold = CASES[name]["expected"]
    for table in GOLD_TABLES:
        expected = renamed(run["export"], tag, expected_gold[table])
        rows = [restore_row(r, offset, shift) for r in run["gold"][table] if r["tenant_id"].startswith(tag + "|")]
        columns = sorted({c for r in expected for c in r})
        got = sorted((project_row(json_values(r), columns, False) for r in rows), key=repr)
        want = sorted((project_row(json_values(r), columns, True) for r in expected), key=repr)
        assert got == want, f"{name}: gold/{table} differs"


def renamed(export, tag: str, rows: list[dict]) -> list[dict]:
    """A case's expected rows with the keys and element ids its export renamed (found under its tenant prefix)."""
    out = []
    for row in rows:
        [new] = export.rename([dict(row, tenant_id=f"{tag}|{row.get('tenant_id') or '<default>'}")])
        out.append({k: row[k] if k == "tenant_id" else v for k, v in new.items() if k in row or k != "tenant_id"})
    return out


def json_values(row: dict) -> dict:
    """`variables` as a JSON value (gold holds JSON text, the model a value)."""
    v = row.get("variables")
    return dict(row, variables=json.loads(v) if isinstance(v, str) else v) if "variables" in row else row


def test_every_line_is_in_bronze_none_quarantined_none_unmapped_but_the_bad_ones(run):
    records = run["records"]
    replays = len(records) - len({(r["partitionId"], r["position"]) for r in records})
    assert run["quarantined"] == 0
    assert sorted(run["bronze"].items()) == sorted(
        [(False, len(records) - replays)] + ([(True, replays)] if replays else []))
    assert {r["tenant_id"] for r in run["views"]["unmapped_engine_records"]} <= {"<default>"}  # the bad case's


def test_bad_bpmn_is_refused_unread_and_unsupported_elements_listed_not_guessed(run):
    """The bad case (tenant <default>, support/zeebe_bad.py): the run completed; nothing opened
    the FIFO that its external entity and DTD name; the subscriptions of its refused BPMN
    (external entity, external DTD, entity bomb) and of a send task and a message start event
    are UNSUPPORTED_ELEMENT, of a missing element NO_ELEMENT, and none opens: only the
    receive task of the good definition takes its message."""
    assert not run["fifo_opened"], "a reader opened the FIFO that an external entity or DTD names"
    unmapped = {(r["element_id"], r["process_definition_key"]): r["why"] for r in run["views"]["unmapped_engine_records"]
                if r["value_type"] == "PROCESS_MESSAGE_SUBSCRIPTION"}
    assert unmapped == {("wait", 1002): "UNSUPPORTED_ELEMENT", ("wait", 1003): "UNSUPPORTED_ELEMENT",
                        ("wait", 1004): "UNSUPPORTED_ELEMENT", ("notify", 1001): "UNSUPPORTED_ELEMENT",
                        ("begin", 1001): "UNSUPPORTED_ELEMENT", ("gone", 1001): "NO_ELEMENT"}
    gold = {table: [r for r in rows if r["tenant_id"] == "<default>"] for table, rows in run["gold"].items()
            if table in GOLD_TABLES}
    assert [(c["message_key"], c["bpmn_process_id"], c["element_id"]) for c in gold["correlations"]] == [
        (1, "good", "wait")]
    assert [s["element_id"] for s in gold["subscriptions"]] == ["wait"]
    assert sorted((m["message_key"], m["status"]) for m in gold["messages"]) == [
        (1, "CORRELATED"), *((n, "BUFFERED") for n in range(2, 8))]


def test_the_audit_finds_only_the_pairings_of_instances_that_never_start(run):
    """The export pairs each `msg-start:` instance that a record names; where the case never
    starts it (its INSTANCE_ENDED held forever, rule 20a), that pairing is an engine START
    correlation that gold lacks: ONLY_ENGINE, unless the pair (message, process) already has
    its engine row (the first record by (partitionId, position), contract *Engine audit*).
    The bad case's one correlation has no engine record: ONLY_CORRELAKE. Nothing else differs."""
    engine = {}
    for r in sorted(run["records"], key=identity):
        if r["intent"] == "CORRELATED" and r["recordType"] == "EVENT":
            v = r["value"]
            engine.setdefault((v["messageKey"], v["bpmnProcessId"]), v.get("tenantId") or "<default>")
    gold = {(c["message_key"], c["bpmn_process_id"]): c["tenant_id"] for c in run["gold"]["correlations"]}
    want = [(t, *pair, "ONLY_ENGINE") for pair, t in engine.items() if gold.get(pair) != t] + \
        [(t, *pair, "ONLY_CORRELAKE") for pair, t in gold.items() if engine.get(pair) != t]
    assert sorted((d["tenant_id"], d["message_key"], d["bpmn_process_id"], d["difference"])
                  for d in run["views"]["engine_differences"]) == sorted(want)
