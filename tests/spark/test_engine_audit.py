"""The engine audit (contract revision 4, *Engine audit*): gold/engine_correlations, the view
`engine_differences`, `correlake audit`, the report's card and explain's mention, on one lake of
hand-made exporter records run twice, with one difference of each kind and explanation injected
and a later run bringing an earlier record of a pair. Every expected row is worked by hand from
the contract below."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable
from support.helpers import write_jsonl
from support.lake_rows import table_rows  # delta-rs: times as epoch millis

from correlake.analysis import audit
from correlake.interfaces import cli
from correlake.lake import catalog
from correlake.run import pipeline
from correlake.run.writes import How, Write, plan_writes

T0, S, HOUR = 1_767_225_600_000, 1000, 3_600_000  # 2026-01-01T00:00:00Z
NS = 'xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"'
ORDER_XML = (f'<bpmn:definitions {NS}><bpmn:process id="order"><bpmn:intermediateCatchEvent id="wait_pay">'
             '<bpmn:messageEventDefinition messageRef="paid"/></bpmn:intermediateCatchEvent></bpmn:process>'
             '<bpmn:message id="paid" name="paid"/></bpmn:definitions>')
START_XML = (f'<bpmn:definitions {NS}><bpmn:process id="start"><bpmn:startEvent id="go_start">'
             '<bpmn:messageEventDefinition messageRef="go"/></bpmn:startEvent></bpmn:process>'
             '<bpmn:message id="go" name="go"/></bpmn:definitions>')
PMS, MSES = "PROCESS_MESSAGE_SUBSCRIPTION", "MESSAGE_START_EVENT_SUBSCRIPTION"
_positions = iter(range(1, 1000))


def rec(key: int, at: int, value_type: str, intent: str, value: dict, partition: int = 1,
        position: int | None = None) -> dict:
    """One exported EVENT record (`Record#toJson()`'s envelope)."""
    return {"partitionId": partition, "position": next(_positions) if position is None else position, "key": key,
            "timestamp": at, "recordType": "EVENT", "valueType": value_type, "intent": intent, "value": value,
            "brokerVersion": "8.7.0"}


def deployed(key: int, process: str, xml: str, tenant: str | None) -> dict:
    return rec(key, T0, "PROCESS", "CREATED", {"bpmnProcessId": process, "version": 1, "processDefinitionKey": key,
                                               "resourceName": f"{process}.bpmn", "resource": xml,
                                               **({} if tenant is None else {"tenantId": tenant})})


def start_event(key: int, definition: int, tenant: str) -> dict:
    return rec(key, T0, MSES, "CREATED", {"processDefinitionKey": definition, "startEventId": "go_start",
                                          "messageName": "go", "bpmnProcessId": "start", "tenantId": tenant})


def waiting(instance: int, at: int, key: str) -> dict:
    """A subscription of `order`'s catch event in instance `instance` (element instance instance + 1)."""
    return rec(instance + 1, at, PMS, "CREATING", {
        "processInstanceKey": instance, "elementInstanceKey": instance + 1, "elementId": "wait_pay",
        "bpmnProcessId": "order", "processDefinitionKey": 100, "messageName": "paid", "correlationKey": key,
        "interrupting": True, "messageKey": -1, "variables": {}})


def published(key: int, at: int, name: str, corr: str, ttl: int = HOUR, tenant: str | None = None) -> dict:
    return rec(key, at, "MESSAGE", "PUBLISHED", {"name": name, "correlationKey": corr, "messageId": "",
                                                 "timeToLive": ttl, "deadline": at + ttl, "variables": {},
                                                 **({} if tenant is None else {"tenantId": tenant})})


def caught(message: int, at: int, instance: int, corr: str, process: str = "order", **where) -> dict:
    """The engine's PROCESS_MESSAGE_SUBSCRIPTION CORRELATED: `message` to element instance instance + 1."""
    return rec(instance + 1, at, PMS, "CORRELATED", {
        "processInstanceKey": instance, "elementInstanceKey": instance + 1, "elementId": "wait_pay",
        "bpmnProcessId": process, "messageName": "paid", "correlationKey": corr, "messageKey": message,
        "interrupting": True, "variables": {}}, **where)


START_A = rec(21, T0 + 40 * S, MSES, "CORRELATED", {
    "processDefinitionKey": 200, "startEventId": "go_start", "messageName": "go", "bpmnProcessId": "start",
    "correlationKey": "c1", "messageKey": 21, "processInstanceKey": 9001, "variables": {}, "tenantId": "A"})
M1_TO_E2 = caught(11, T0 + 3 * S, 2000, "k1")  # correlake: E1, opened first (rule 17)
RUN_1 = [
    deployed(100, "order", ORDER_XML, ""), deployed(200, "start", START_XML, "A"), start_event(201, 200, "A"),
    deployed(300, "start", START_XML, "B"), start_event(301, 300, "B"),
    waiting(1000, T0 + 1 * S, "k1"), waiting(2000, T0 + 2 * S, "k1"), published(11, T0 + 3 * S, "paid", "k1"),
    M1_TO_E2,
    waiting(6000, T0 + 4 * S, "k5"), published(15, T0 + 5 * S, "paid", "k5"),
    caught(15, T0 + 5 * S, 9900, "k5", partition=2, position=10),  # later than run 2's (1, 500): replaced
    caught(15, T0 + 5 * S, 7000, "k5", process="billing"),  # no such subscription in correlake
    waiting(3000, T0 + 6 * S, "k2"), published(12, T0 + 7 * S, "paid", "k2"),  # the engine exported no correlation
    published(13, T0 + 10 * S, "paid", "k3", ttl=1000), waiting(4000, T0 + 20 * S, "k3"),
    caught(13, T0 + 20 * S, 4000, "k3"),  # at/after its deadline (T0 + 11 s): the engine's TTL checker had not run
    published(14, T0 + 30 * S, "paid", "k4", ttl=5000), caught(14, T0 + 31 * S, 5000, "k4"),  # never opened here
    published(21, T0 + 40 * S, "go", "c1", tenant="A"), START_A,
    published(22, T0 + 41 * S, "go", "c1", tenant="B"),  # the engine's lock on (start, c1) is A's instance's
    rec(9001, T0 + 50 * S, "PROCESS_INSTANCE", "ELEMENT_COMPLETED", {
        "bpmnElementType": "PROCESS", "processInstanceKey": 9001, "bpmnProcessId": "start", "elementId": "start",
        "processDefinitionKey": 200, "version": 1, "flowScopeKey": -1, "tenantId": "A"}),
]
RUN_2 = [caught(15, T0 + 5 * S, 6000, "k5", position=500), M1_TO_E2]  # an earlier record of a pair; a replay


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp((T0 + seconds * S) / 1000, timezone.utc).replace(tzinfo=None)


# (tenant, message, process) -> difference, explanation, gold (instance, element), engine (instance, element)
EXPECTED = {
    ("<default>", 11, "order"): ("OTHER_TARGET", None, ("1000", "1001"), ("2000", "2001")),
    ("<default>", 12, "order"): ("ONLY_CORRELAKE", None, ("3000", "3001"), (None, None)),
    ("<default>", 13, "order"): ("ONLY_ENGINE", "AFTER_DEADLINE", (None, None), ("4000", "4001")),
    ("<default>", 14, "order"): ("ONLY_ENGINE", "NO_SUBSCRIPTION", (None, None), ("5000", "5001")),
    ("<default>", 15, "billing"): ("ONLY_ENGINE", None, (None, None), ("7000", "7001")),
    ("B", 22, "start"): ("ONLY_CORRELAKE", "LOCK_OTHER_TENANT", ("msg-start:start:22", None), (None, None)),
}


def differences(spark, lake: str) -> dict[tuple, tuple]:
    catalog.register(spark, lake, ["engine_differences"])
    return {(r["tenant_id"], r["message_key"], r["bpmn_process_id"]):
            (r["difference"], r["explanation"], (r["gold_process_instance_key"], r["gold_element_instance_key"]),
             (r["engine_process_instance_key"], r["engine_element_instance_key"]))
            for r in spark.table("engine_differences").collect()}


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """The lake after each of its two runs: the runs' results and engine_differences after the first."""
    root = tmp_path_factory.mktemp("engine_audit")
    landing, lake = root / "landing", str(root / "lake")
    write_jsonl(landing / "zeebe" / "partition-1.jsonl", RUN_1)
    first = pipeline.run(spark, str(landing), lake)
    before = differences(spark, lake)
    write_jsonl(landing / "zeebe" / "partition-1-later.jsonl", RUN_2)
    second = pipeline.run(spark, str(landing), lake)
    return {"lake": lake, "first": first, "second": second, "before": before}


def test_engine_correlations_keep_the_first_record_of_each_pair(audited):
    rows = {(r["message_key"], r["bpmn_process_id"]): r for r in table_rows(audited["lake"], "engine_correlations")}
    assert {k: (r["subscription_type"], r["process_instance_key"], r["element_instance_key"], r["partition_id"],
                r["position"] if k == (15, "order") else None, r["correlated_at"]) for k, r in rows.items()} == {
        (11, "order"): ("CATCH", "2000", "2001", 1, None, T0 + 3 * S),
        (15, "order"): ("CATCH", "6000", "6001", 1, 500, T0 + 5 * S),  # run 2's (1, 500) replaced run 1's (2, 10)
        (15, "billing"): ("CATCH", "7000", "7001", 1, None, T0 + 5 * S),
        (13, "order"): ("CATCH", "4000", "4001", 1, None, T0 + 20 * S),
        (14, "order"): ("CATCH", "5000", "5001", 1, None, T0 + 31 * S),
        (21, "start"): ("START", "msg-start:start:21", None, 1, None, T0 + 40 * S),  # named as correlake names it
    }
    assert (rows[(21, "start")]["tenant_id"], rows[(21, "start")]["correlation_key"]) == ("A", "c1")
    assert (rows[(13, "order")]["message_name"], rows[(11, "order")]["tenant_id"]) == ("paid", "<default>")
    first, second = audited["first"], audited["second"]
    assert (first.engine_correlations, first.engine_duplicates) == (6, 0)
    assert (second.engine_correlations, second.engine_duplicates) == (1, 1)  # the replay is no duplicate


def test_engine_differences_are_exactly_those_injected(spark, audited):
    assert differences(spark, audited["lake"]) == EXPECTED
    assert audited["before"] == {**EXPECTED, ("<default>", 15, "order"): (  # before run 2 brought the first record
        "OTHER_TARGET", None, ("6000", "6001"), ("9900", "9901"))}


def test_audit_counts_and_rows_and_its_exit_codes(audited, demo_lake, capsys):
    lake = audited["lake"]
    assert cli.main(["audit", "--lake", lake]) == 1
    out = capsys.readouterr().out
    assert "6 differences" in out and "LOCK_OTHER_TENANT" in out and "AFTER_DEADLINE" in out
    assert cli.main(["audit", "--lake", lake, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert {(r["difference"], r["explanation"]): r["n"] for r in found["counts"]} == {
        (d, e): 1 for d, e, _, _ in EXPECTED.values()}
    assert audit.stats_counts(found) == {  # the hourly DAG's stats task's counts
        f"engine · {d} · {e or '-'}": 1 for d, e, _, _ in EXPECTED.values()}
    assert [(r["tenant_id"], r["message_key"], r["bpmn_process_id"]) for r in found["rows"]] == sorted(EXPECTED)
    lock = found["rows"][-1]
    assert (lock["message_name"], lock["correlation_key"], lock["gold_correlated_at"]) == (
        "go", "c1", "2026-01-01T00:00:41.000Z")
    assert cli.main(["audit", "--lake", demo_lake]) == 2  # a lake of the canonical streams
    assert "holds no Zeebe exporter records" in capsys.readouterr().err


def test_a_lake_that_agrees_with_its_engine_audits_clean(spark, tmp_path, capsys):
    landing, lake = tmp_path / "landing", str(tmp_path / "lake")
    write_jsonl(landing / "zeebe" / "p1.jsonl", [
        deployed(100, "order", ORDER_XML, None), waiting(1000, T0 + S, "k"), published(11, T0 + 2 * S, "paid", "k"),
        caught(11, T0 + 2 * S, 1000, "k")])
    pipeline.run(spark, str(landing), lake)
    pipeline.run(spark, None, lake, rebuild=True)  # recomputed from bronze: the same row
    assert len(table_rows(lake, "engine_correlations")) == 1
    [last] = DeltaTable(f"{lake}/gold/engine_correlations").history(1)  # the log, read by delta-rs
    assert (last["operation"], last["operationParameters"]["mode"]) == ("WRITE", "Overwrite")  # the rebuild's
    assert cli.main(["audit", "--lake", lake]) == 0
    assert "no difference" in capsys.readouterr().out


def test_canonical_lakes_have_an_empty_engine_differences(spark, demo_lake):
    assert differences(spark, demo_lake) == {}
    assert "engine_differences" in catalog.present(demo_lake)


def test_report_and_explain_tell_of_the_engine(audited, tmp_path, capsys):
    lake, out = audited["lake"], tmp_path / "report.html"
    assert cli.main(["report", "--lake", lake, "--out", str(out)]) == 0
    html = out.read_text()
    assert "The engine and correlake" in html and "LOCK_OTHER_TENANT" in html and "msg-start:start:22" in html
    capsys.readouterr()
    assert cli.main(["explain", "--lake", lake, "--message-key", "13"]) == 0
    told = capsys.readouterr().out
    assert "the engine differs (ONLY_ENGINE, AFTER_DEADLINE) on order: gold none; engine instance 4000 " \
           "element 4001 at 2026-01-01 00:00:20.000" in told
    assert cli.main(["explain", "--lake", lake, "--message-key", "21"]) == 0  # it agrees: nothing said
    assert "the engine differs" not in capsys.readouterr().out


def test_the_write_plan_of_engine_correlations():
    from correlake.config import TABLES

    lake = {name: 3 for name in TABLES} | {"engine_correlations": -1}
    assert "engine_correlations" not in plan_writes(lake).tables  # no rows: a canonical lake gets no table
    assert Write("engine_correlations", How.CREATE) in plan_writes(lake, engine_correlations=2).writes
    kept = {**lake, "engine_correlations": 3}
    assert Write("engine_correlations", How.EARLIEST) in plan_writes(kept, engine_correlations=2).writes
    assert Write("engine_correlations", How.OVERWRITE) in plan_writes(kept, rebuild=True, engine_correlations=2).writes


def test_a_pairing_that_comes_later_renames_the_rows_it_names(spark):
    """A CATCH kept under its instance's engine key (9500) is renamed by the run that brings the
    MESSAGE_START_EVENT_SUBSCRIPTION CORRELATED record pairing that key with message 23."""
    from correlake.contract.schemas import ENGINE_CORRELATION, ENGINE_RECORD
    from correlake.transforms.engine_audit import correlated, run_rows
    from correlake.transforms.engine_mapping import start_pairs, with_value

    def bronze(r: dict) -> dict:
        row = {name: None for name in ENGINE_RECORD.fieldNames()}
        row.update(partition_id=r["partitionId"], position=r["position"], key=r["key"], timestamp=at(
            (r["timestamp"] - T0) // S), record_type="EVENT", value_type=r["valueType"], intent=r["intent"],
            tenant_id="A", value=json.dumps(r["value"]), _is_replay=False)
        return row

    kept = caught(31, T0 + 60 * S, 9500, "c2")
    table = spark.createDataFrame([{**{n: None for n in ENGINE_CORRELATION.fieldNames()}, "tenant_id": "A",
                                    "message_key": 31, "message_name": "paid", "correlation_key": "c2",
                                    "bpmn_process_id": "order", "process_instance_key": "9500",
                                    "element_instance_key": "9501", "subscription_type": "CATCH",
                                    "correlated_at": at(60), "partition_id": 1, "position": kept["position"]}],
                                  ENGINE_CORRELATION)
    pairing = rec(23, T0 + 59 * S, MSES, "CORRELATED", {
        "processDefinitionKey": 200, "startEventId": "go_start", "messageName": "go", "bpmnProcessId": "start",
        "correlationKey": "c2", "messageKey": 23, "processInstanceKey": 9500, "variables": {}, "tenantId": "A"})
    records = with_value(spark.createDataFrame([bronze(pairing)], ENGINE_RECORD))
    found, pairs = correlated(records), start_pairs(records)
    rows, fresh = run_rows(found, pairs, pairs, table)
    duplicates = found.count() - fresh.count()
    assert {(r["message_key"], r["process_instance_key"], r["position"]) for r in rows.collect()} == {
        (23, "msg-start:start:23", pairing["position"]),  # the START row of the pairing itself
        (31, "msg-start:start:23", kept["position"])}  # the kept CATCH, renamed: the same record, so replaced
    assert duplicates == 0
