"""BPMN 2.0 XML of a process definition, as a modeler writes it (namespaced, `bpmn:` prefix,
Zeebe extension elements), holding the message elements that a case's subscriptions use,
each of the kind that its contract element type names, and its message start events."""

from __future__ import annotations

import base64
import re
from xml.sax.saxutils import quoteattr

NCNAME = re.compile(r"[A-Za-z_][\w.\-]*")
# characters XML 1.0 cannot hold
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n'
        '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
        'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" xmlns:modeler="http://camunda.org/schema/modeler/1.0" '
        'id="Definitions_1" targetNamespace="http://bpmn.io/schema/bpmn" exporter="Camunda Modeler" '
        'modeler:executionPlatform="Camunda Cloud" modeler:executionPlatformVersion="8.8.0">\n')


def xml_safe(text: str) -> bool:
    return not NOT_XML.search(text)


def _message(name: str, refs: dict[str, str]) -> str:
    return f'<bpmn:messageEventDefinition messageRef="{refs[name]}" />'


def process_xml(process: str, elements: dict[str, tuple[str, str, bool]], starts: list[str],
                hosts: dict[str, str]) -> str:
    """The document of process `process`: `elements` maps each element id to (contract element
    type, message name, interrupting); `starts` are the names of its message start events;
    `hosts` maps a boundary event's id to the activity it is attached to (a receive task among
    `elements`, else a service task made for it)."""
    names = sorted({name for _, name, _ in elements.values()} | set(starts))
    refs = {name: f"Message_{i}" for i, name in enumerate(names)}
    body = ['<bpmn:startEvent id="start" />', '<bpmn:eventBasedGateway id="gateway" />']
    flows = []
    for i, name in enumerate(starts):
        body.append(f'<bpmn:startEvent id="message_start_{i}" name={quoteattr(name)}>{_message(name, refs)}'
                    '</bpmn:startEvent>')
    for host in sorted({h for h in hosts.values() if h not in elements}):
        body.append(f'<bpmn:serviceTask id="{host}"><bpmn:extensionElements><zeebe:taskDefinition type="work" />'
                    '</bpmn:extensionElements></bpmn:serviceTask>')
    for element_id, (kind, name, interrupting) in sorted(elements.items()):
        definition = _message(name, refs)
        if kind == "RECEIVE_TASK":
            body.append(f'<bpmn:receiveTask id="{element_id}" messageRef="{refs[name]}" />')
        elif kind == "BOUNDARY_EVENT":
            body.append(f'<bpmn:boundaryEvent id="{element_id}" cancelActivity="{str(interrupting).lower()}" '
                        f'attachedToRef="{hosts[element_id]}">{definition}</bpmn:boundaryEvent>')
        elif kind == "EVENT_SUBPROCESS":
            body.append(f'<bpmn:subProcess id="{element_id}_scope" triggeredByEvent="true">'
                        f'<bpmn:startEvent id="{element_id}" isInterrupting="{str(interrupting).lower()}">'
                        f'{definition}</bpmn:startEvent></bpmn:subProcess>')
        else:  # an intermediate catch event: after the gateway, or entered from the start event
            body.append(f'<bpmn:intermediateCatchEvent id="{element_id}">{definition}</bpmn:intermediateCatchEvent>')
            source = "gateway" if kind == "EVENT_BASED_GATEWAY" else "start"
            flows.append(f'<bpmn:sequenceFlow id="flow_{element_id}" sourceRef="{source}" targetRef="{element_id}" />')
    messages = "".join(f'<bpmn:message id="{ref}" name={quoteattr(name)}><bpmn:extensionElements>'
                       '<zeebe:subscription correlationKey="=key" /></bpmn:extensionElements></bpmn:message>\n'
                       for name, ref in refs.items())
    return (HEAD + f'<bpmn:process id="{process}" isExecutable="true">\n' + "\n".join(body + flows)
            + "\n</bpmn:process>\n" + messages + "</bpmn:definitions>\n")


def resource(xml: str) -> str:
    """A resource as the engine exports a byte array: base64."""
    return base64.b64encode(xml.encode()).decode()
