"""contract/bpmn.py: element types as the contract's *Element types* paragraph says, and BPMN
that would read more than the record refused."""

import base64

import pytest

from correlake.contract.bpmn import BpmnRefused, element_types

NS = 'xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"'
PROCESS = f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions {NS} xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
  <bpmn:process id="orders" isExecutable="true">
    <bpmn:startEvent id="start"><bpmn:messageEventDefinition messageRef="m"/></bpmn:startEvent>
    <bpmn:receiveTask id="wait_payment" messageRef="m"/>
    <bpmn:serviceTask id="ship"><bpmn:extensionElements><zeebe:taskDefinition type="ship"/>
    </bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:boundaryEvent id="cancel" attachedToRef="ship" cancelActivity="false"/>
    <bpmn:eventBasedGateway id="gw"/>
    <bpmn:sequenceFlow id="to_a" sourceRef="gw" targetRef="branch_a"/>
    <bpmn:intermediateCatchEvent id="branch_a"/>
    <bpmn:intermediateCatchEvent id="plain"/>
    <bpmn:sequenceFlow id="to_plain" sourceRef="ship" targetRef="plain"/>
    <bpmn:sendTask id="notify"/>
    <bpmn:subProcess id="esp" triggeredByEvent="true"><bpmn:startEvent id="esp_start"/></bpmn:subProcess>
    <bpmn:subProcess id="sub"><bpmn:startEvent id="sub_start"/></bpmn:subProcess>
  </bpmn:process>
</bpmn:definitions>"""
EXPECTED = {"wait_payment": "RECEIVE_TASK", "cancel": "BOUNDARY_EVENT", "branch_a": "EVENT_BASED_GATEWAY",
            "plain": "INTERMEDIATE_CATCH_EVENT", "esp_start": "EVENT_SUBPROCESS",
            # kinds the mapping does not take: their BPMN names
            "start": "startEvent", "sub_start": "startEvent", "notify": "sendTask", "ship": "serviceTask"}


def _subset(types: dict) -> dict:
    return {k: types.get(k) for k in EXPECTED}


def test_each_element_type_from_raw_xml():
    assert _subset(element_types(PROCESS)) == EXPECTED


def test_base64_resource_reads_as_its_xml():
    assert _subset(element_types(base64.b64encode(PROCESS.encode()).decode())) == EXPECTED


def test_default_namespace_and_other_prefixes_are_the_same_model():
    text = PROCESS.replace("bpmn:", "").replace(NS, 'xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"')
    assert _subset(element_types(text)) == EXPECTED
    assert _subset(element_types(PROCESS.replace("bpmn:", "b2:").replace("xmlns:bpmn", "xmlns:b2"))) == EXPECTED


def test_elements_outside_the_model_namespace_are_not_elements():
    assert element_types('<definitions><process id="p"><receiveTask id="r"/></process></definitions>') == {}


BOMB = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
        + f']><bpmn:definitions {NS}><bpmn:process id="p">&lol9;</bpmn:process></bpmn:definitions>')


@pytest.mark.parametrize("resource", [
    BOMB,
    f'<!DOCTYPE d [<!ENTITY e SYSTEM "file:///etc/passwd">]><bpmn:definitions {NS}>&e;</bpmn:definitions>',
    f'<!DOCTYPE d SYSTEM "http://127.0.0.1:9/d.dtd"><bpmn:definitions {NS}/>',
    f'<!DOCTYPE d [<!ENTITY x "y">]><bpmn:definitions {NS}/>',
], ids=["entity bomb", "external entity", "external DTD", "internal entity"])
def test_dtds_and_entities_are_refused(resource):
    with pytest.raises(BpmnRefused, match="BPMN refused"):
        element_types(resource)
    with pytest.raises(BpmnRefused, match="BPMN refused"):
        element_types(base64.b64encode(resource.encode()).decode())


@pytest.mark.parametrize("resource", ["<bpmn:definitions", "not base64!", "PGE+"],
                         ids=["unclosed", "neither", "base64 of a fragment"])
def test_unreadable_resources_are_refused(resource):
    with pytest.raises(BpmnRefused):
        element_types(resource)
