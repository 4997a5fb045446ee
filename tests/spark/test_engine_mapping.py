"""Exporter records mapped in silver (contract revision 4, *Mapping*), through the real
pipeline: hand-built records in a landing's zeebe/ folder, two runs (the first on the Spark backend,
the second on the driver backend, forced). Each case has a tenant of its own; expected values are
worked out by hand from the contract.

- `<default>` (no tenantId): the mapping rows of a receive task, a message and the element's
  completion in the millisecond of the message (the end after the message: CORRELATED, not
  ELEMENT_LEFT); `messageId` "" is none.
- `late`: a subscription without processDefinitionKey, its definition found through its
  owner's PROCESS_INSTANCE record, arriving in run 2: opened then, gold restated.
- `named`: a subscription naming a definition that never arrives, though its owner's does (no
  fallback): listed NO_DEFINITION.
- `odd`: an unsupported element, an element the definition lacks, a refused BPMN (a DTD), a
  PROCESS DELETED: listed with why.
- `starts`: a definition whose MESSAGE_START_EVENT_SUBSCRIPTION CREATED arrives in run 2,
  after its message: the message starts an instance then; the engine's pairing names the
  instance's end.
"""

from __future__ import annotations

import base64

import pytest
from support.helpers import read_gold, write_jsonl
from support.lake_rows import table_rows

from correlake.run import pipeline

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
NS = 'xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"'


def bpmn(process: str, body: str) -> str:
    xml = f'<?xml version="1.0"?><bpmn:definitions {NS}><bpmn:process id="{process}">{body}</bpmn:process>' \
          "</bpmn:definitions>"
    return base64.b64encode(xml.encode()).decode()


ELEMENTS = ('<bpmn:receiveTask id="rt"/><bpmn:eventBasedGateway id="gw"/>'
            '<bpmn:sequenceFlow id="f" sourceRef="gw" targetRef="gb"/><bpmn:intermediateCatchEvent id="gb"/>'
            '<bpmn:sendTask id="send"/><bpmn:startEvent id="start"/>')
REFUSED = base64.b64encode(f'<!DOCTYPE d [<!ENTITY e "x">]><bpmn:definitions {NS}>&e;</bpmn:definitions>'
                           .encode()).decode()


class Records:
    """Exporter records of one partition, positions counted up."""

    def __init__(self, partition: int):
        self.partition, self.position = partition, 0

    def __call__(self, key: int, t: int, value_type: str, intent: str, value: dict, tenant: str | None) -> dict:
        self.position += 1
        if tenant is not None:
            value = {**value, "tenantId": tenant}
        return {"partitionId": self.partition, "position": self.position, "key": key, "timestamp": T0 + t,
                "recordType": "EVENT", "valueType": value_type, "intent": intent, "value": value,
                "brokerVersion": "8.7.0", "recordVersion": 1}


def definition(r: Records, key: int, t: int, process: str, version: int, resource: str, tenant: str | None) -> dict:
    return r(key, t, "PROCESS", "CREATED", {"bpmnProcessId": process, "version": version, "processDefinitionKey": key,
                                           "resource": resource, "resourceName": f"{process}.bpmn"}, tenant)


def creating(r: Records, t: int, pik: int, eik: int, element: str, name: str, key: str, tenant: str | None,
             process: str = "p", definition_key: int | None = None) -> dict:
    value = {"processInstanceKey": pik, "elementInstanceKey": eik, "elementId": element, "bpmnProcessId": process,
             "messageName": name, "correlationKey": key, "interrupting": True, "messageKey": -1}
    if definition_key is not None:
        value["processDefinitionKey"] = definition_key
    return r(-1, t, "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", value, tenant)


def published(r: Records, key: int, t: int, name: str, correlation_key: str, tenant: str | None,
              ttl: int = 3_600_000) -> dict:
    return r(key, t, "MESSAGE", "PUBLISHED", {"name": name, "correlationKey": correlation_key, "messageId": "",
                                              "timeToLive": ttl, "variables": {"n": key}, "deadline": -1}, tenant)


def instance(r: Records, key: int, t: int, intent: str, element_type: str, pik: int, definition_key: int,
             tenant: str | None, element: str = "x") -> dict:
    return r(key, t, "PROCESS_INSTANCE", intent, {"bpmnElementType": element_type, "processInstanceKey": pik,
                                                  "processDefinitionKey": definition_key, "elementId": element,
                                                  "bpmnProcessId": "p", "version": 1}, tenant)


P1, P2 = Records(1), Records(2)
RUN_1 = [
    # <default>: p v1 (definition 100); receive task rt of instance 1001 (element 1002) waits for m/k1
    definition(P1, 100, 0, "p", 1, bpmn("p", ELEMENTS), None),
    creating(P1, 1000, 1001, 1002, "rt", "m", "k1", None, definition_key=100),
    published(P2, 5001, 2000, "m", "k1", ""),  # tenantId "": the default tenant
    instance(P1, 1002, 2000, "ELEMENT_COMPLETED", "RECEIVE_TASK", 1001, 100, None, "rt"),  # same ms, after it
    {"partitionId": 1, "position": 99, "key": 1, "timestamp": T0, "recordType": "COMMAND", "valueType": "JOB",
     "intent": "CREATE", "value": {}},  # ignored
    # late: the owner's record names definition 200, which arrives in run 2
    instance(P1, 2002, 1000, "ELEMENT_ACTIVATED", "EVENT_BASED_GATEWAY", 2001, 200, "late", "gw"),
    creating(P1, 1000, 2001, 2002, "gb", "m2", "k2", "late", process="q"),
    published(P2, 5002, 3000, "m2", "k2", "late"),
    # named: names definition 300 (never here); its owner's record names 301, which is here
    definition(P1, 301, 0, "p", 1, bpmn("p", ELEMENTS), "named"),
    instance(P1, 3002, 1000, "ELEMENT_ACTIVATED", "RECEIVE_TASK", 3001, 301, "named", "rt"),
    creating(P1, 1000, 3001, 3002, "rt", "m", "k3", "named", definition_key=300),
    # odd
    definition(P1, 400, 0, "p", 1, bpmn("p", ELEMENTS), "odd"),
    definition(P1, 401, 0, "r", 1, REFUSED, "odd"),
    creating(P1, 1000, 4001, 4002, "send", "m", "k4", "odd", definition_key=400),
    creating(P1, 1000, 4001, 4003, "nope", "m", "k4", "odd", definition_key=400),
    creating(P1, 1000, 4004, 4005, "rt", "m", "k4", "odd", process="r", definition_key=401),
    P1(400, 1500, "PROCESS", "DELETED", {"bpmnProcessId": "p", "version": 1, "processDefinitionKey": 400}, "odd"),
    # starts: s v1 (definition 500) has a message start event, but its MSES CREATED comes in run 2
    definition(P1, 500, 0, "s", 1, bpmn("s", ELEMENTS), "starts"),
    published(P2, 5005, 5000, "go", "x", "starts"),
]
RUN_2 = [
    definition(P1, 200, 500, "q", 3, bpmn("q", ELEMENTS), "late"),
    P1(501, 0, "MESSAGE_START_EVENT_SUBSCRIPTION", "CREATED",
       {"processDefinitionKey": 500, "bpmnProcessId": "s", "messageName": "go", "startEventId": "start"}, "starts"),
    P2(502, 5000, "MESSAGE_START_EVENT_SUBSCRIPTION", "CORRELATED",
       {"processDefinitionKey": 500, "bpmnProcessId": "s", "messageName": "go", "messageKey": 5005,
        "processInstanceKey": 6001, "correlationKey": "x", "startEventId": "start"}, "starts"),
    instance(P2, 6001, 7000, "ELEMENT_COMPLETED", "PROCESS", 6001, 500, "starts", "s"),
]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """(lake, gold after run 1, gold after run 2): run 1 on the Spark backend, run 2 (the late
    records) on the driver backend, both forced."""
    root = tmp_path_factory.mktemp("engine")
    lake, golds = str(root / "lake"), []
    for n, (records, path) in enumerate(((RUN_1, "spark"), (RUN_2, "driver"))):
        write_jsonl(root / "landing" / "zeebe" / f"{n}.jsonl", records)
        pipeline.run(spark, str(root / "landing"), lake, path=path)
        golds.append(read_gold(lake))
    return lake, *golds


def rows(gold: dict, table: str, tenant: str, *columns: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in gold[table] if r["tenant_id"] == tenant)


def test_mapping_rows_and_the_end_after_the_message_in_its_millisecond(lake):
    _, first, _ = lake
    assert rows(first, "correlations", "<default>", "message_key", "bpmn_process_id", "process_version",
                "process_instance_key", "element_instance_key", "element_id", "subscription_type", "correlated_at",
                "variables") == [(5001, "p", 1, "1001", "1002", "rt", "CATCH", T0 + 2000, '{"n":5001}')]
    assert rows(first, "subscriptions", "<default>", "element_type", "opened_at", "closed_at", "close_reason") == [
        ("RECEIVE_TASK", T0 + 1000, T0 + 2000, "CORRELATED")]
    assert rows(first, "messages", "<default>", "message_key", "message_id", "ttl_ms", "status") == [
        (5001, None, 3_600_000, "CORRELATED")]


def test_a_definition_arriving_later_opens_its_subscription_and_restates_gold(lake):
    _, first, second = lake
    assert rows(first, "messages", "late", "message_key", "status") == [(5002, "BUFFERED")]
    assert rows(first, "subscriptions", "late", "element_instance_key") == []
    assert rows(second, "subscriptions", "late", "element_instance_key", "element_type", "process_version",
                "opened_at", "close_reason") == [("2002", "EVENT_BASED_GATEWAY", 3, T0 + 1000, "CORRELATED")]
    assert rows(second, "correlations", "late", "message_key", "bpmn_process_id", "correlated_at") == [
        (5002, "q", T0 + 3000)]


def test_start_events_arriving_later_start_the_instance_the_pairing_names(lake):
    _, first, second = lake
    assert rows(first, "message_started_instances", "starts", "process_instance_key") == []
    assert rows(second, "message_started_instances", "starts", "process_instance_key", "process_version",
                "message_key", "started_at", "ended_at") == [("msg-start:s:5005", 1, 5005, T0 + 5000, T0 + 7000)]
    assert rows(second, "correlations", "starts", "message_key", "subscription_type") == [(5005, "START")]


def test_unmapped_records_are_listed_with_why(lake):
    listed = table_rows(lake[0], "silver_engine_pending")  # read with delta-rs
    got = sorted((r["tenant_id"], r["value_type"], r["intent"], r["process_definition_key"], r["element_id"], r["why"])
                 for r in listed)
    assert got == [
        ("named", "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", 300, "rt", "NO_DEFINITION"),
        ("odd", "PROCESS", "DELETED", 400, None, "RESOURCE_DELETION"),
        ("odd", "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", 400, "nope", "NO_ELEMENT"),
        ("odd", "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", 400, "send", "UNSUPPORTED_ELEMENT"),
        ("odd", "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", 401, "rt", "UNSUPPORTED_ELEMENT"),  # a BPMN refused
    ]


def test_as_of_counts_mapped_records_only(lake):
    _, first, second = lake
    # run 1's last mapped record: message 5005 at +5000 (the pending ones and the ignored command do not count)
    assert first["as_of"] == [{"as_of": T0 + 5000}]
    assert second["as_of"] == [{"as_of": T0 + 7000}]
