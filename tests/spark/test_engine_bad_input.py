"""Bad exporter input end to end (contract revision 4, *Element types*): process definitions
whose BPMN would read more than its record — an external entity and an external DTD naming a
FIFO outside the landing, an entity bomb ("billion laughs") — and subscriptions of elements the
mapping does not take (a send task, a message start event outside an event subprocess) or that
the definition lacks, beside a receive task that correlates. One `correlake run` (Spark's
path) completes; each such subscription is listed in `unmapped_engine_records` with its why,
none opens (its message stays buffered), the receive task's message correlates, and nothing
ever opened the FIFO: a watcher opens it for writing, which returns only once a reader opens
it (and the reader then reads an empty file instead of blocking), so it tells whether anything
did, with no timing involved."""

from __future__ import annotations

import base64
import os
import threading

import pytest
from support.helpers import read_gold, write_jsonl
from support.zeebe_records import record

from correlake.config import ENGINE_STREAM
from correlake.interfaces import cli
from correlake.lake import catalog

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
NS = 'xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"'
BODY = ('<bpmn:process id="{p}" isExecutable="true"><bpmn:receiveTask id="wait" messageRef="m"/>'
        '<bpmn:sendTask id="notify"/><bpmn:startEvent id="begin"><bpmn:messageEventDefinition messageRef="m"/>'
        '</bpmn:startEvent></bpmn:process>')
LAUGHS = "".join(f'<!ENTITY l{i} "{"".join(f"&l{i - 1};" for _ in range(10))}">' for i in range(1, 10))


def definitions(secret: str) -> dict[str, str]:
    """Process id -> its BPMN document."""
    def doc(process: str, doctype: str = "", text: str = "") -> str:
        return (f'<?xml version="1.0" encoding="UTF-8"?>{doctype}<bpmn:definitions {NS} id="d">'
                f"<bpmn:documentation>{text}</bpmn:documentation>{BODY.format(p=process)}</bpmn:definitions>")

    return {"good": doc("good"),
            "entity": doc("entity", f'<!DOCTYPE bpmn:definitions [<!ENTITY secret SYSTEM "file://{secret}">]>',
                          "&secret;"),
            "dtd": doc("dtd", f'<!DOCTYPE bpmn:definitions SYSTEM "file://{secret}">'),
            "bomb": doc("bomb", f'<!DOCTYPE bpmn:definitions [<!ENTITY l0 "ha">{LAUGHS}]>', "&l9;")}


class Watcher(threading.Thread):
    """Opens a FIFO for writing: that returns when anything opens it for reading."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path, self.opened, self.done = path, False, False

    def run(self):
        with open(self.path, "wb"):  # blocks until a reader comes; closing gives that reader an empty file
            self.opened = not self.done

    def stop(self) -> None:
        self.done = True
        os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK))  # the test's own reader releases the watcher
        self.join()


def records(xml: dict[str, str]) -> list[dict]:
    """A definition per process; per process a receive task's subscription (`good`'s alone can
    open), in `good` a send task's, a start event's and a missing element's; a message for each."""
    out, position = [], 0

    def add(key, value_type, intent, value, at=T0):
        nonlocal position
        position += 1
        out.append(dict(record(1, key, at, value_type, intent, value), position=position))

    for n, (process, doc) in enumerate(xml.items(), start=1):
        add(1000 + n, "PROCESS", "CREATED", {"bpmnProcessId": process, "version": 1, "processDefinitionKey": 1000 + n,
                                             "resourceName": f"{process}.bpmn", "tenantId": "<default>",
                                             "resource": base64.b64encode(doc.encode()).decode()})
    elements = [(process, "wait") for process in xml] + [("good", "notify"), ("good", "begin"), ("good", "gone")]
    for n, (process, element) in enumerate(elements, start=1):
        add(3000 + n, "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", {
            "processInstanceKey": 2000 + n, "elementInstanceKey": 4000 + n, "bpmnProcessId": process,
            "processDefinitionKey": 1001 + list(xml).index(process), "messageName": "m", "correlationKey": f"k{n}",
            "elementId": element, "interrupting": True, "tenantId": "<default>"}, T0 + 1000)
        add(n, "MESSAGE", "PUBLISHED", {"name": "m", "correlationKey": f"k{n}", "messageId": "", "timeToLive": 600_000,
                                        "variables": {}, "tenantId": "<default>"}, T0 + 2000)
    return out


@pytest.fixture(scope="module")
def outcome(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("engine_bad_input")
    secret = str(root / "outside" / "secret.fifo")  # beside the landing, not in it
    os.makedirs(os.path.dirname(secret))
    os.mkfifo(secret)
    watcher = Watcher(secret)
    watcher.start()
    write_jsonl(root / "landing" / ENGINE_STREAM / "export.jsonl", records(definitions(secret)))
    lake = str(root / "lake")
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("CORRELAKE_RUN_PATH", "spark")
            code = cli.main(["run", "--landing", str(root / "landing"), "--lake", lake])
    finally:
        watcher.stop()
    catalog.register(spark, lake, ["unmapped_engine_records"])
    unmapped = {(r["element_id"], r["process_definition_key"]): r["why"] for r in spark.sql(
        "SELECT * FROM unmapped_engine_records WHERE value_type = 'PROCESS_MESSAGE_SUBSCRIPTION'").collect()}
    return code, watcher.opened, unmapped, read_gold(spark, lake)


def test_the_run_completes_and_nothing_outside_the_landing_was_opened(outcome):
    code, opened, _, _ = outcome
    assert code == 0
    assert not opened, "a reader opened the FIFO that an external entity or DTD names"


def test_refused_and_unsupported_subscriptions_are_listed_not_guessed(outcome):
    _, _, unmapped, gold = outcome
    assert unmapped == {("wait", 1002): "UNSUPPORTED_ELEMENT", ("wait", 1003): "UNSUPPORTED_ELEMENT",
                        ("wait", 1004): "UNSUPPORTED_ELEMENT", ("notify", 1001): "UNSUPPORTED_ELEMENT",
                        ("begin", 1001): "UNSUPPORTED_ELEMENT", ("gone", 1001): "NO_ELEMENT"}
    assert [(c["message_key"], c["bpmn_process_id"], c["element_id"]) for c in gold["correlations"]] == [
        (1, "good", "wait")]
    assert [s["element_id"] for s in gold["subscriptions"]] == ["wait"]
    assert sorted((m["message_key"], m["status"]) for m in gold["messages"]) == [
        (1, "CORRELATED"), *((n, "BUFFERED") for n in range(2, 8))]
