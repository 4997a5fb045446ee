"""The tests' exporter records (support/zeebe_export.py) checked against the contract
(revision 4, *Zeebe exporter records*) with no pipeline in between: every record a valid
envelope, replays identical, positions increasing per partition, the mapped kinds of one
millisecond in the contract's order, each subscription's element of its type in its
definition's BPMN (read back by contract/bpmn.py), every message-started instance paired, and
the mapping of the records (`Export.canonical`) giving the reference model the case's gold
with its keys renamed, for the conformance scenarios and generated cases alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.generators import START_EVENTS, generate_cases
from support.helpers import canonical_rows, iso_to_millis
from support.reference_model import reference
from support.zeebe_export import START, convert, identity, unfaithful

from correlake.config import ENGINE_STREAM, GOLD_TABLES
from correlake.contract.bpmn import element_types
from correlake.contract.records import parse_line

DATA = Path(__file__).parents[1] / "data"
SCENARIOS = sorted(DATA.glob("conformance/*.json")) + sorted(DATA.glob("scenarios/*.json"))
# an element or instance end in the millisecond of a message: the engine writes the end after
# the message, the canonical order puts it before (contract revision 4, the order's paragraph)
UNFAITHFUL = {"instance_end_before_start_is_held", "release_same_ms_as_new_message", "same_ms_workflow_before_message"}
ENVELOPE = {"partitionId": int, "position": int, "key": int, "timestamp": int, "recordType": str, "valueType": str,
            "intent": str, "value": dict}
CLASS = {("PROCESS", "CREATED"): 0, ("PROCESS_MESSAGE_SUBSCRIPTION", "CREATING"): 0, ("MESSAGE", "PUBLISHED"): 1,
         ("PROCESS_INSTANCE", "ELEMENT_COMPLETED"): 2, ("PROCESS_INSTANCE", "ELEMENT_TERMINATED"): 2}


def cases() -> list[tuple[str, dict]]:
    scenarios = [(p.stem, json.loads(p.read_text())) for p in SCENARIOS]
    generated = generate_cases(12) + generate_cases(8, START_EVENTS)
    return scenarios + [(f"generated{i}", c) for i, c in enumerate(generated)]


CASES = cases()


@pytest.fixture(scope="module")
def exports():
    return {name: convert(c["messages"], c["workflow_events"], partitions=3, noise=2, engine_correlations=True, seed=i)
            for i, (name, c) in enumerate(CASES)}


def test_every_record_is_a_valid_envelope_and_a_replay_repeats_one_identity(exports):
    for name, export in exports.items():
        seen = {}
        for r in export.records:
            assert all(type(r[f]) is t for f, t in ENVELOPE.items()), (name, r)
            assert r["partitionId"] >= 1 and r["position"] >= 0
            parse_line(ENGINE_STREAM, json.dumps(r).encode())  # the product's reading of the envelope accepts it
            assert seen.setdefault(identity(r), r) == r, (name, "two records of one identity differ")


def test_positions_increase_per_partition_and_a_millisecond_keeps_the_contracts_order(exports):
    for name, export in exports.items():
        last, mapped, seen = {}, {}, set()
        for r in export.records:
            if identity(r) in seen:
                continue  # a replay
            seen.add(identity(r))
            assert r["position"] > last.get(r["partitionId"], -1), name
            last[r["partitionId"]] = r["position"]
            kind = CLASS.get((r["valueType"], r["intent"]))
            if kind is not None and r["recordType"] == "EVENT" and r["partitionId"] == 1:
                mapped.setdefault(r["timestamp"], []).append(kind)
        assert all(kinds == sorted(kinds) for kinds in mapped.values()), name


def test_each_subscription_element_has_its_type_in_its_definitions_bpmn(exports):
    forms = set()
    for (name, case), export in zip(CASES, exports.values(), strict=True):
        definitions = {r["value"]["processDefinitionKey"]: element_types(r["value"]["resource"])
                       for r in export.records if (r["valueType"], r["intent"]) == ("PROCESS", "CREATED")}
        owners = {r["key"]: r["value"]["processDefinitionKey"] for r in export.records
                  if r["valueType"] == "PROCESS_INSTANCE" and r["intent"] == "ELEMENT_ACTIVATED"}
        opened = [r["value"] for r in export.records if (r["valueType"], r["intent"]) ==
                  ("PROCESS_MESSAGE_SUBSCRIPTION", "CREATING")]
        assert len({identity(r) for r in export.records if r["intent"] == "CREATING"}) == sum(
            u[1]["type"] == "SUBSCRIPTION_OPENED" for u in export.units if u[0] != "messages"), name
        for value in opened:
            pdk = value.get("processDefinitionKey", owners.get(value["elementInstanceKey"]))
            types = definitions[pdk]
            assert types.get(value["elementId"]) in {"RECEIVE_TASK", "BOUNDARY_EVENT", "EVENT_SUBPROCESS",
                                                     "EVENT_BASED_GATEWAY", "INTERMEDIATE_CATCH_EVENT"}, name
        forms.update("processDefinitionKey" in v for v in opened)
    assert forms == {True, False}  # opens that name their definition, and opens found through their owner


def test_every_message_started_instance_named_is_paired(exports):
    for name, export in exports.items():
        paired = {r["value"]["processInstanceKey"] for r in export.records if (r["valueType"], r["intent"]) ==
                  ("MESSAGE_START_EVENT_SUBSCRIPTION", "CORRELATED")}
        for stream, canon, _, _, aliases, _ in export.units:
            for column, engine_key, _ in aliases:
                assert START.fullmatch(canon[column]) and int(engine_key) in paired, name


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_the_mapped_records_give_the_cases_gold_with_keys_renamed(exports, name):
    case = dict(CASES)[name]
    reason = unfaithful(case["messages"], case["workflow_events"])
    if name.startswith("generated"):
        if reason:  # the generator's times: a message and an end often share a millisecond
            assert reason == "an element or instance end in the millisecond of a message", reason
        return
    assert (reason is not None) == (name in UNFAITHFUL), reason
    if reason:
        return
    export = exports[name]
    want = reference(*export.canonical())
    for table in GOLD_TABLES:  # unfaithful() compared the models; here the scenario's expected rows too
        expected = export.rename(case["expected"][table])
        columns = sorted({c for r in expected for c in r})
        assert project(want[table], columns) == project(expected, columns), (name, table)


def project(rows: list[dict], columns: list[str]) -> list[tuple]:
    def cell(c, v):
        return iso_to_millis(v) if isinstance(v, str) and c.endswith(("_at", "deadline")) else v
    return canonical_rows([{c: cell(c, r.get(c)) for c in columns} for r in rows])
