"""Bad exporter input (contract revision 4, *Element types*): process definitions whose BPMN
would read more than its record (an external entity and an external DTD naming a file, an
entity bomb), and subscriptions of elements the mapping does not take or that the definition
lacks, beside a receive task that correlates; and a watcher of a FIFO, which tells whether
anything opened it."""

from __future__ import annotations

import base64
import os
import threading

from .zeebe_records import record

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


def records(xml: dict[str, str], partition: int) -> list[dict]:
    """Records of `partition`: a definition per process; per process a receive task's subscription (`good`'s alone can
    open), in `good` a send task's, a start event's and a missing element's; a message for each."""
    out, position = [], 0

    def add(key, value_type, intent, value, at=T0):
        nonlocal position
        position += 1
        out.append(dict(record(partition, key, at, value_type, intent, value), position=position))

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
        add(n, "MESSAGE", "PUBLISHED", {"name": "m", "correlationKey": f"k{n}", "messageId": "", "variables": {},
                                        "timeToLive": 30 * 86_400_000, "tenantId": "<default>"}, T0 + 2000)
    return out
