"""Element types from a process definition's BPMN 2.0 XML (contract revision 4, *Element
types*): the `resource` of a `PROCESS` `CREATED` record, parsed with DTDs, entities and
external references refused (defusedxml over ElementTree), so that nothing outside the
record is ever read."""

from __future__ import annotations

import base64
import binascii
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from correlake.contract.enums import (
    BOUNDARY_EVENT,
    EVENT_BASED_GATEWAY,
    EVENT_SUBPROCESS,
    INTERMEDIATE_CATCH_EVENT,
    RECEIVE_TASK,
)

MODEL = "{http://www.omg.org/spec/BPMN/20100524/MODEL}"  # BPMN 2.0's model namespace


class BpmnRefused(ValueError):
    """A resource that is not a BPMN document the mapping may read (its text says why)."""


def document(resource: str) -> bytes | str:
    """The XML of a `resource`: the text itself when it starts with `<`, else its base64."""
    if resource.lstrip().startswith("<"):
        return resource
    try:
        return base64.b64decode(resource, validate=True)
    except (binascii.Error, ValueError):
        raise BpmnRefused("resource is neither XML nor base64") from None


def _parsed(resource: str) -> Element:
    try:
        return fromstring(document(resource), forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:  # a DTD, an entity, an external reference: never expanded nor fetched
        raise BpmnRefused(f"BPMN refused: {type(exc).__name__}") from None
    except ParseError as exc:
        raise BpmnRefused(f"BPMN not well-formed: {exc}") from None


def _local(element: Element) -> str | None:
    """An element's name in BPMN's model namespace, else None (extensions, diagrams)."""
    tag = element.tag
    return tag[len(MODEL):] if isinstance(tag, str) and tag.startswith(MODEL) else None


def element_types(resource: str) -> dict[str, str]:
    """Element id -> type of every BPMN model element with an id: the contract's element type
    for those a message subscription may belong to, else the element's BPMN name (`sendTask`,
    `startEvent`…: a kind the mapping does not take). BpmnRefused when it cannot be read."""
    root = _parsed(resource)
    parents = {child: parent for parent in root.iter() for child in parent}
    kinds = {el.get("id"): _local(el) for el in root.iter() if _local(el) and el.get("id")}
    after_gateway = {el.get("targetRef") for el in root.iter() if _local(el) == "sequenceFlow"
                     and kinds.get(el.get("sourceRef")) == "eventBasedGateway"}
    types = {}
    for el in root.iter():
        kind, id_ = _local(el), el.get("id")
        if not kind or not id_:
            continue
        parent = parents.get(el)
        if kind == "receiveTask":
            types[id_] = RECEIVE_TASK
        elif kind == "boundaryEvent":
            types[id_] = BOUNDARY_EVENT
        elif kind == "startEvent" and parent is not None and _local(parent) == "subProcess" \
                and parent.get("triggeredByEvent") == "true":
            types[id_] = EVENT_SUBPROCESS
        elif kind == "intermediateCatchEvent":
            types[id_] = EVENT_BASED_GATEWAY if id_ in after_gateway else INTERMEDIATE_CATCH_EVENT
        else:
            types[id_] = kind
    return types
