"""Zeebe 8.x exporter records (`Record#toJson()`'s shape, contract revision 4): the envelope,
the kinds an export carries that correlake does not map (jobs, variables, incidents,
commands, rejections, other intents), and an export of a case (`zeebe_export.convert`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .reference_model import DEFAULT_TENANT

BROKER = "8.8.0"


def record(partition: int, key: int, at: int, value_type: str, intent: str, value: dict,
           record_type: str = "EVENT") -> dict:
    """One exported record, as `Record#toJson()` writes it; its position is set by the layout."""
    return {"partitionId": partition, "value": value, "rejectionType": "NULL_VAL", "rejectionReason": "",
            "sourceRecordPosition": -1, "key": key, "position": None, "timestamp": at,
            "recordType": record_type, "valueType": value_type, "intent": intent, "brokerVersion": BROKER,
            "recordVersion": 1, "operationReference": -1, "batchOperationReference": -1, "authorizations": {}}


def identity(r: dict) -> tuple[int, int]:
    return r["partitionId"], r["position"]


@dataclass
class Export:
    records: list = field(default_factory=list)  # in the order written; replays repeat a record
    renamed: dict = field(default_factory=dict)  # (tenant, column, original key) -> engine key digits
    element_ids: dict = field(default_factory=dict)  # (tenant, element instance key, message name) -> element id
    units: list = field(default_factory=list)  # (stream, canonical record, all of, any of, aliases, starts)

    def rename(self, rows: list[dict]) -> list[dict]:
        """Gold rows of the original case with instance keys and element ids as the export names them."""
        out = []
        for row in rows:
            row, tenant = dict(row), row.get("tenant_id") or DEFAULT_TENANT
            if "element_id" in row and row.get("element_instance_key") is not None:  # by its name, if the row has it
                ids = {v for (t, k, name), v in self.element_ids.items() if (t, k) == (tenant, row["element_instance_key"])
                       and row.get("message_name", name) == name}
                row["element_id"] = ids.pop() if len(ids) == 1 else row["element_id"]
            for column in ("process_instance_key", "element_instance_key"):
                if row.get(column) is not None:
                    row[column] = self.renamed.get((tenant, column, row[column]), row[column])
            out.append(row)
        return out

    def canonical(self, present: set | None = None) -> tuple[list, list]:
        """(messages, workflow events) that the mapping makes of the records whose identities
        are in `present` (None: all of them)."""
        def have(i):
            return present is None or i in present

        messages, events = [], []
        for rank, (stream, canon, all_of, any_of, aliases, starts) in enumerate(self.units, start=1):
            if not _mapped(all_of, any_of, have):
                continue
            canon = dict(canon)
            for column, engine_key, pairing in aliases:
                if not have(pairing):
                    canon[column] = engine_key
            if stream == "messages":
                messages.append(canon)
                continue
            canon["position"] = rank
            if starts is not None:
                canon["message_start_events"] = [name for name, i in starts if have(i)]
            events.append(canon)
        return messages, events

    def waiting(self, present: set) -> set:
        """The identities of the records in `present` of a mapped kind that the mapping cannot map
        yet (subscriptions whose definition has not arrived: `unmapped_engine_records`' NO_DEFINITION)."""
        return {all_of[0] for _, _, all_of, any_of, _, _ in self.units
                if all_of[0] in present and not _mapped(all_of, any_of, present.__contains__)}


def _mapped(all_of: list, any_of: list, have) -> bool:
    """Whether a unit's records are there: every one of `all_of` (its own first), one of `any_of` if any."""
    return all(map(have, all_of)) and (not any_of or any(map(have, any_of)))


def noise_record(rnd, anchor: dict, key: int) -> dict:
    """An unmapped record beside `anchor` (its partition, time and tenant), of a kind drawn by `rnd`:
    a job, a variable, an incident, a timer, a command, a rejection, another intent of a mapped kind."""
    value = anchor["value"]
    tenant = {"tenantId": value["tenantId"]} if "tenantId" in value else {}
    scope = {"processInstanceKey": value.get("processInstanceKey", key), "bpmnProcessId": value.get("bpmnProcessId", "p"),
             "processDefinitionKey": value.get("processDefinitionKey", -1), "elementId": value.get("elementId", "task"),
             "elementInstanceKey": anchor["key"], **tenant}
    kinds = [
        ("EVENT", "JOB", "CREATED", dict(scope, type="work", worker="", retries=3, deadline=-1, customHeaders={},
                                          variables={}, processDefinitionVersion=value.get("version", 1))),
        ("EVENT", "VARIABLE", "CREATED", {"name": "order", "value": '{"id":12345678901234567}', "scopeKey": anchor["key"],
                                          **{k: scope[k] for k in ("processInstanceKey", "bpmnProcessId",
                                                                   "processDefinitionKey")}, **tenant}),
        ("EVENT", "INCIDENT", "CREATED", dict(scope, errorType="JOB_NO_RETRIES", errorMessage="boom", jobKey=key,
                                               variableScopeKey=anchor["key"])),
        ("EVENT", "TIMER", "CREATED", dict(scope, dueDate=anchor["timestamp"] + 60_000, repetitions=1,
                                           targetElementId="timer")),
        ("EVENT", "PROCESS_INSTANCE", "SEQUENCE_FLOW_TAKEN", dict(scope, bpmnElementType="SEQUENCE_FLOW",
                                                                  elementId="flow", version=1)),
        ("EVENT", "PROCESS_MESSAGE_SUBSCRIPTION", "CREATED", dict(scope, messageName="m", correlationKey="k",
                                                                   messageKey=-1, variables={}, interrupting=True)),
        ("EVENT", "MESSAGE", "EXPIRED", {"name": "m", "correlationKey": "k", "messageId": "", "timeToLive": 0,
                                         "deadline": anchor["timestamp"], "variables": {}, **tenant}),
        ("COMMAND", "MESSAGE", "PUBLISH", {"name": "m", "correlationKey": "k", "messageId": "", "timeToLive": 1000,
                                           "deadline": -1, "variables": {}, **tenant}),
        ("COMMAND_REJECTION", "MESSAGE", "PUBLISH", {"name": "m", "correlationKey": "k", "messageId": "dup",
                                                     "timeToLive": 1000, "deadline": -1, "variables": {}, **tenant}),
        ("COMMAND", "PROCESS_INSTANCE", "COMPLETE_ELEMENT", dict(scope, bpmnElementType="SERVICE_TASK", version=1)),
    ]
    record_type, value_type, intent, noise_value = rnd.choice(kinds)
    out = record(anchor["partitionId"], -1 if record_type != "EVENT" else key, anchor["timestamp"], value_type,
                 intent, noise_value, record_type)
    if record_type == "COMMAND_REJECTION":
        out.update(rejectionType="ALREADY_EXISTS", rejectionReason="a message with this id is still buffered")
    return out
