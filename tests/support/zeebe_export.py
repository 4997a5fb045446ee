"""A canonical case as the records a Zeebe 8.x broker's exporters write for it
(`Record#toJson()`: contract revision 4, *Zeebe exporter records*), for the tests of the
`zeebe/` stream. Messages keep their position as key; instance keys become engine keys (the
partition in the high bits, as the engine encodes them; `Export.renamed`); element ids stay
unless one id names elements of several types (`Export.element_ids`); the instances correlake
names `msg-start:{bpmn}:{message}` get an engine key and the `MESSAGE_START_EVENT_SUBSCRIPTION`
`CORRELATED` record that pairs them, at their start (the reference model's), else at the
first record that names them.

Order: one canonical record's records come together on its tenant's partition (messages: on
their key's), in the contract's order within a millisecond (deployments and opens, then
messages, then element and instance ends). A process version that subscriptions use but no
`PROCESS_DEPLOYED` deploys gets a definition without message start events before every
other record: until the first real deployment of the process no start event is active
either way, and a later deployment replaces it (rule 18), so it changes nothing.
`Export.canonical` gives what the mapping makes of any subset of the records, as canonical
records for the reference model (workflow events numbered in the exporter's order)."""

from __future__ import annotations

import json
import random
import re
import zlib

from correlake.config import GOLD_TABLES
from correlake.contract.records import BadRecord, parse_line

from .helpers import canonical_rows
from .reference_model import DEFAULT_TENANT, normalise, reference
from .zeebe_bpmn import NCNAME, process_xml, resource, xml_safe
from .zeebe_records import Export, identity, noise_record, record

START = re.compile(r"msg-start:(.*):(\d{1,18})")
ENDS = ("ELEMENT_LEFT", "INSTANCE_ENDED")
OWNER_TYPES = {"RECEIVE_TASK": "RECEIVE_TASK", "INTERMEDIATE_CATCH_EVENT": "INTERMEDIATE_CATCH_EVENT",
               "EVENT_BASED_GATEWAY": "EVENT_BASED_GATEWAY", "BOUNDARY_EVENT": "SERVICE_TASK",
               "EVENT_SUBPROCESS": "SUB_PROCESS"}


class Unconvertible(ValueError):
    """A case the exporter records cannot express with its semantics kept (says why)."""


def convert(landing_messages: list, landing_events: list, partitions: int = 1, noise: int = 0,
            engine_correlations: bool = False, seed: int = 0) -> Export:
    """The export of canonical landing records: `noise` unmapped records per mapped one; with
    `engine_correlations`, the engine's CORRELATED records of the reference model's
    correlations. Records the contract quarantines, and records conflicting with an earlier
    one of their position, are left out; an exact replay is written twice."""
    return _Builder(partitions, noise, random.Random(seed)).build(landing_messages, landing_events,
                                                                   engine_correlations)


def valid(stream: str, records: list) -> tuple[list, list, dict]:
    """(raw records, normalised records, copies by position): the first valid record of each position."""
    raw, out, copies = {}, [], {}
    for r in records:
        text = r if isinstance(r, str) else json.dumps(r)
        try:
            parse_line(stream, text.encode())
        except BadRecord:
            continue
        r = json.loads(text)
        if r["position"] not in raw:
            raw[r["position"]] = r
            out.append(normalise(stream, r))
        copies[r["position"]] = copies.get(r["position"], 0) + (raw[r["position"]] == r)
    return list(raw.values()), out, copies


class _Builder:
    def __init__(self, partitions: int, noise: int, rnd: random.Random):
        self.partitions, self.noise, self.rnd = partitions, noise, rnd
        self.export, self.counters, self.groups, self.keys = Export(), {}, [], {}
        self.activated, self.referenced = set(), {}

    def key(self, partition: int) -> int:
        """A fresh engine key of `partition`."""
        self.counters[partition] = self.counters.get(partition, 0) + 1
        return (partition << 51) + self.counters[partition]

    def tenant_value(self, tenant: str) -> dict:
        if tenant != DEFAULT_TENANT:
            return {"tenantId": tenant}
        return self.rnd.choice([{"tenantId": DEFAULT_TENANT}, {"tenantId": ""}, {}])  # 8.3+, or before

    def instance(self, tenant: str, column: str, original: str) -> int:
        name = (tenant, column, original)
        if name not in self.keys:
            if original.startswith("msg-start:") and not START.fullmatch(original):
                raise Unconvertible(f"{original!r}: of the reserved form, but no instance a message starts")
            self.keys[name] = self.key(self.partition[tenant])
            if not START.fullmatch(original):
                self.export.renamed[name] = str(self.keys[name])
        return self.keys[name]

    def build(self, landing_messages, landing_events, engine_correlations: bool) -> Export:
        raw_m, messages, m_copies = valid("messages", landing_messages)
        raw_e, events, e_copies = valid("workflow_events", landing_events)
        self.partition = {t: 1 + i % self.partitions
                          for i, t in enumerate(sorted({r["tenant_id"] for r in messages + events}))}
        self.start_time = min([m["published_at"] for m in messages] + [e["timestamp"] for e in events], default=0)
        self.definitions(events, e_copies)
        for m in messages:
            self.message(m, m_copies[m["position"]])
        for e in (e for e in events if e["type"] != "PROCESS_DEPLOYED"):
            order = (e["timestamp"], 2 if e["type"] in ENDS else 0, e["position"])
            getattr(self, e["type"].lower())(e, order, e_copies[e["position"]])
        # the model's correlations (quadratic) only when they are written or a pairing needs its start
        model = reference(raw_m, raw_e) if engine_correlations or self.referenced else {"correlations": []}
        self.correlations(model["correlations"], {m["position"]: m for m in messages}, engine_correlations)
        return self.layout()

    def add(self, order: tuple, records: list[dict], unit: tuple | None = None, copies: int = 1,
            symbol: tuple | None = None) -> None:
        self.groups.append((order, records, unit, copies, symbol))

    # -- definitions
    def definitions(self, events: list[dict], copies: dict) -> None:
        """Element ids and owners; one PROCESS CREATED (and its MSES CREATED) per deployment, and
        per process version that subscriptions use but nothing deploys."""
        opens = [e for e in events if e["type"] == "SUBSCRIPTION_OPENED"]
        for e in opens + [e for e in events if e["type"] == "PROCESS_DEPLOYED"]:
            if not NCNAME.fullmatch(e["bpmn_process_id"]):
                raise Unconvertible(f"process id {e['bpmn_process_id']!r} is no BPMN id")
        types = {}
        for e in opens:
            types.setdefault((e["tenant_id"], e["bpmn_process_id"], e["process_version"], e["element_id"]),
                             set()).add(e["element_type"])
        self.elements, self.owners, self.hosts, self.definition_keys = {}, {}, {}, {}
        for e in opens:
            t, orig, definition = e["tenant_id"], e["element_id"], (e["tenant_id"], e["bpmn_process_id"],
                                                                     e["process_version"])
            if orig is None or not NCNAME.fullmatch(orig) or len(types[(*definition, orig)]) > 1:
                e["element_id"] = f"{orig if orig and NCNAME.fullmatch(orig) else 'el'}_{e['element_type'].lower()}"
                self.export.element_ids[(t, e["element_instance_key"], e["message_name"])] = e["element_id"]
            self.elements.setdefault(definition, {}).setdefault(
                e["element_id"], (e["element_type"], e["message_name"], e["interrupting"]))
            self.owners.setdefault((t, e["element_instance_key"]), {"definition": definition, "subs": []})["subs"].append(e)
        for owner in self.owners.values():
            tasks = [s["element_id"] for s in owner["subs"] if s["element_type"] == "RECEIVE_TASK"
                     and (s["tenant_id"], s["bpmn_process_id"], s["process_version"]) == owner["definition"]]
            for s in owner["subs"]:
                if s["element_type"] == "BOUNDARY_EVENT":
                    self.hosts.setdefault((s["tenant_id"], s["bpmn_process_id"], s["process_version"]), {}).setdefault(
                        s["element_id"], tasks[0] if tasks else f"{s['element_id']}_host")
            first = owner["subs"][0]
            kind = "RECEIVE_TASK" if tasks else first["element_type"]
            owner.update(type=OWNER_TYPES[kind], element_id=tasks[0] if tasks else {
                "EVENT_BASED_GATEWAY": "gateway", "EVENT_SUBPROCESS": f"{first['element_id']}_scope",
                "BOUNDARY_EVENT": self.hosts.get(owner["definition"], {}).get(first["element_id"])}.get(
                kind, first["element_id"]))
        deployed = {(e["tenant_id"], e["bpmn_process_id"], e["process_version"]) for e in events
                    if e["type"] == "PROCESS_DEPLOYED"}
        for n, (t, bpmn, version) in enumerate(sorted(set(self.elements) - deployed)):
            self.process_deployed({"tenant_id": t, "bpmn_process_id": bpmn, "process_version": version,
                                   "message_start_events": [], "timestamp": self.start_time,
                                   "type": "PROCESS_DEPLOYED"}, (self.start_time, 0, -1 - n), 1)
        for e in events:
            if e["type"] == "PROCESS_DEPLOYED":
                self.process_deployed(e, (e["timestamp"], 0, e["position"]), copies[e["position"]])

    def process_deployed(self, e: dict, order: tuple, copies: int) -> None:
        definition, starts = (e["tenant_id"], e["bpmn_process_id"], e["process_version"]), e["message_start_events"]
        if not all(xml_safe(name) for name, _, _ in self.elements.get(definition, {}).values()) or \
                not all(xml_safe(name) for name in starts):
            raise Unconvertible(f"a message name of {definition} cannot be written in XML")
        pdk = self.key(1)  # deployments are made on partition 1
        self.definition_keys.setdefault(definition, pdk)
        xml = process_xml(e["bpmn_process_id"], self.elements.get(definition, {}), starts,
                          self.hosts.get(definition, {}))
        t, tenant, partition = e["timestamp"], self.tenant_value(e["tenant_id"]), self.partition[e["tenant_id"]]
        records = [record(partition, pdk, t, "PROCESS", "CREATED", {
            "bpmnProcessId": e["bpmn_process_id"], "version": e["process_version"], "processDefinitionKey": pdk,
            "resourceName": f"{e['bpmn_process_id']}.bpmn", "checksum": resource(str(zlib.crc32(xml.encode()))),
            "resource": resource(xml), "duplicate": False, "deploymentKey": pdk - 1, "versionTag": "", **tenant})]
        records += [record(partition, self.key(1), t, "MESSAGE_START_EVENT_SUBSCRIPTION", "CREATED", {
            "processDefinitionKey": pdk, "bpmnProcessId": e["bpmn_process_id"], "startEventId": f"message_start_{i}",
            "messageName": name, "messageKey": -1, "correlationKey": "", "processInstanceKey": -1, "variables": {},
            **tenant}) for i, name in enumerate(starts)]
        unit = ("workflow_events", dict(e, message_start_events=[]), [0], [], [],
                [(name, i + 1) for i, name in enumerate(starts)])
        self.add(order, records, unit, copies, ("definition", pdk))

    # -- the streams' records
    def message(self, m: dict, copies: int) -> None:
        value = {"name": m["name"], "correlationKey": m["correlation_key"], "messageId": m["message_id"] or "",
                 "timeToLive": m["ttl_ms"], "deadline": m["published_at"] + m["ttl_ms"], "variables": m["variables"],
                 **self.tenant_value(m["tenant_id"])}
        partition = 1 + zlib.crc32(m["correlation_key"].encode()) % self.partitions  # by key, as the engine does
        canon = {k: m[k] for k in ("position", "name", "correlation_key", "published_at", "ttl_ms", "message_id",
                                   "variables", "tenant_id")}
        self.add((m["published_at"], 1, m["position"]),
                 [record(partition, m["position"], m["published_at"], "MESSAGE", "PUBLISHED", value)],
                 ("messages", canon, [0], [], [], None), copies)

    def instance_key(self, e: dict, column: str = "process_instance_key") -> tuple[int, list]:
        """The engine key of `e`'s instance, and the alias of one that a message starts."""
        key = self.instance(e["tenant_id"], column, e[column])
        if not START.fullmatch(e[column]):
            return key, []
        self.referenced.setdefault((e["tenant_id"], e[column]), e["timestamp"])
        return key, [(column, str(key), ("pairing", e["tenant_id"], e[column]))]

    def owner_value(self, tenant: str, element_instance_key: str) -> dict:
        """The value of the PROCESS_INSTANCE records of an owner element instance."""
        owner = self.owners[(tenant, element_instance_key)]
        first = owner["subs"][0]
        pik = self.instance(tenant, "process_instance_key", first["process_instance_key"])
        return {"bpmnProcessId": owner["definition"][1], "version": owner["definition"][2],
                "processDefinitionKey": self.definition_keys[owner["definition"]], "processInstanceKey": pik,
                "elementId": owner["element_id"], "flowScopeKey": pik, "bpmnElementType": owner["type"],
                "bpmnEventType": "UNSPECIFIED", "parentProcessInstanceKey": -1, "parentElementInstanceKey": -1,
                **self.tenant_value(tenant)}

    def subscription_opened(self, e: dict, order: tuple, copies: int) -> None:
        t, owner_name = e["tenant_id"], (e["tenant_id"], e["element_instance_key"])
        pik, aliases = self.instance_key(e)
        eik = self.instance(t, "element_instance_key", e["element_instance_key"])
        pdk = self.definition_keys[(t, e["bpmn_process_id"], e["process_version"])]
        owner_value, records = self.owner_value(*owner_name), []
        if owner_name not in self.activated:  # the owner element's activation, once
            self.activated.add(owner_name)
            records += [record(self.partition[t], eik, e["timestamp"], "PROCESS_INSTANCE", intent, owner_value)
                        for intent in ("ELEMENT_ACTIVATING", "ELEMENT_ACTIVATED")]
        value = {"processInstanceKey": pik, "elementInstanceKey": eik, "bpmnProcessId": e["bpmn_process_id"],
                 "messageName": e["message_name"], "correlationKey": e["correlation_key"],
                 "elementId": e["element_id"], "messageKey": -1, "variables": {},
                 "interrupting": e["interrupting"], **self.tenant_value(t)}
        named = pdk != owner_value["processDefinitionKey"] or self.rnd.random() < 0.5  # as brokers from late 2025 on
        if named:
            value["processDefinitionKey"] = pdk
        records.append(record(self.partition[t], self.key(self.partition[t]), e["timestamp"],
                              "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", value))
        canon = {k: e[k] for k in ("tenant_id", "type", "timestamp", "bpmn_process_id", "process_version",
                                   "element_id", "element_type", "message_name", "correlation_key", "interrupting")}
        canon.update(process_instance_key=e["process_instance_key"] if aliases else str(pik),
                     element_instance_key=str(eik))
        unit = ("workflow_events", canon, [len(records) - 1, ("definition", pdk)],
                [] if named else [("owner", eik)], aliases, None)
        self.add(order, records, unit, copies)

    def element_left(self, e: dict, order: tuple, copies: int) -> None:
        t = e["tenant_id"]
        eik = self.instance(t, "element_instance_key", e["element_instance_key"])
        value = self.owner_value(t, e["element_instance_key"]) if (t, e["element_instance_key"]) in self.owners \
            else {"bpmnProcessId": "process", "version": 1, "processDefinitionKey": -1, "elementId": "task",
                  "processInstanceKey": self.key(self.partition[t]), "bpmnElementType": "SERVICE_TASK",
                  **self.tenant_value(t)}
        self.end(e, order, copies, eik, value, [])

    def instance_ended(self, e: dict, order: tuple, copies: int) -> None:
        pik, aliases = self.instance_key(e)
        started = START.fullmatch(e["process_instance_key"])
        process = started.group(1) if started else "process"
        value = {"bpmnProcessId": process, "version": 1, "processDefinitionKey": -1, "processInstanceKey": pik,
                 "elementId": process, "flowScopeKey": -1, "bpmnElementType": "PROCESS",
                 **self.tenant_value(e["tenant_id"])}
        self.end(e, order, copies, pik, value, aliases)

    def end(self, e: dict, order: tuple, copies: int, key: int, value: dict, aliases: list) -> None:
        ending, partition = self.rnd.choice(["COMPLETED", "TERMINATED"]), self.partition[e["tenant_id"]]
        records = [record(partition, key, e["timestamp"], "PROCESS_INSTANCE", f"ELEMENT_{ending[:-2]}ING", value),
                   record(partition, key, e["timestamp"], "PROCESS_INSTANCE", f"ELEMENT_{ending}", value)]
        column = "element_instance_key" if e["type"] == "ELEMENT_LEFT" else "process_instance_key"
        canon = {k: e[k] for k in ("tenant_id", "type", "timestamp")}
        canon[column] = e[column] if aliases else str(key)
        self.add(order, records, ("workflow_events", canon, [1], [], aliases, None), copies)

    # -- the engine's correlations
    def correlations(self, rows: list[dict], messages: dict, engine_correlations: bool) -> None:
        """The pairing of each message-started instance that a record names (and, with
        `engine_correlations`, of every one the model starts), and the CATCH CORRELATED records."""
        starts = {(c["tenant_id"], c["process_instance_key"]): c for c in rows if c["subscription_type"] == "START"}
        pairs = set(self.referenced) | (set(starts) if engine_correlations else set())
        for t, name in sorted(pairs):
            process, message_key = START.fullmatch(name).groups()
            m, c = messages.get(int(message_key), {}), starts.get((t, name))
            at = c["correlated_at"] if c else self.referenced[(t, name)]
            pik = self.instance(t, "process_instance_key", name)
            self.add((at, 1, int(message_key) + 0.25), [record(self.partition[t], self.key(self.partition[t]), at,
                     "MESSAGE_START_EVENT_SUBSCRIPTION", "CORRELATED", {
                         "processDefinitionKey": self.definition_keys.get((t, process, c and c["process_version"]), -1),
                         "bpmnProcessId": process, "startEventId": "message_start_0",
                         "messageName": m.get("name", ""), "messageKey": int(message_key),
                         "correlationKey": m.get("correlation_key", ""), "processInstanceKey": pik,
                         "variables": m.get("variables", {}), **self.tenant_value(t)})], symbol=("pairing", t, name))
        for c in rows if engine_correlations else ():
            if c["subscription_type"] != "CATCH":
                continue
            t, m = c["tenant_id"], messages[c["message_key"]]
            [row] = self.export.rename([c])
            self.add((c["correlated_at"], 1, c["message_key"] + 0.5), [record(
                self.partition[t], self.key(self.partition[t]), c["correlated_at"], "PROCESS_MESSAGE_SUBSCRIPTION",
                "CORRELATED", {"processInstanceKey": self.instance(t, "process_instance_key", c["process_instance_key"]),
                               "elementInstanceKey": int(row["element_instance_key"]), "messageKey": c["message_key"],
                               "messageName": c["message_name"], "correlationKey": c["correlation_key"],
                               "bpmnProcessId": c["bpmn_process_id"], "elementId": row["element_id"],
                               "interrupting": True, "variables": m["variables"], **self.tenant_value(t)})])

    def layout(self) -> Export:
        """Positions per partition in the exporter's order, noise after each canonical record's
        records, replays repeated; the units' needs as record identities."""
        positions, symbols, placed = {}, {}, []
        for order, records, unit, copies, symbol in sorted(self.groups, key=lambda g: g[0]):
            for r in records:
                positions[r["partitionId"]] = positions.get(r["partitionId"], 0) + 1
                r.update(position=positions[r["partitionId"]], sourceRecordPosition=positions[r["partitionId"]] - 1)
                if r["valueType"] == "PROCESS_INSTANCE":
                    symbols.setdefault(("owner", r["key"]), []).append(identity(r))
            if symbol:
                symbols[symbol] = [identity(records[0])]
            self.export.records += records * copies
            partition = records[0]["partitionId"]
            for _ in range(self.noise if unit else 0):
                positions[partition] = positions.get(partition, 0) + 1
                self.export.records.append(dict(noise_record(self.rnd, records[0], self.key(partition)),
                                                position=positions[partition]))
            placed.append((records, unit))
        for records, unit in placed:
            if unit:
                stream, canon, all_of, any_of, aliases, starts = unit
                def ids(needs):
                    return [i for n in needs for i in ([identity(records[n])] if isinstance(n, int) else symbols.get(n, []))]
                self.export.units.append((stream, canon, ids(all_of), ids(any_of),
                                          [(c, k, (ids([p]) or [None])[0]) for c, k, p in aliases],
                                          None if starts is None else [(n, identity(records[i])) for n, i in starts]))
        return self.export


def unfaithful(landing_messages: list, landing_events: list) -> str | None:
    """Why the export of a case would not keep its result (None: it keeps it): it cannot be
    written, an element or instance end shares a millisecond with a message of its tenant (the exporter's
    order puts the end after it, the canonical order before), or the exporter's order within a
    millisecond changes the reference model's result."""
    try:
        export = convert(landing_messages, landing_events)
    except Unconvertible as exc:
        return str(exc)
    messages, events = export.canonical()
    ends = {(e["tenant_id"], e["timestamp"]) for e in events if e["type"] in ENDS}
    if ends & {(m["tenant_id"], m["published_at"]) for m in messages}:  # (rule 3a: tenants never interact)
        return "an element or instance end in the millisecond of a message"
    want, got = reference(valid("messages", landing_messages)[0], valid("workflow_events", landing_events)[0]), \
        reference(messages, events)
    if any(canonical_rows(export.rename(want[t])) != canonical_rows(got[t]) for t in GOLD_TABLES):
        return "the exporter's order within a millisecond changes the result"
    return None
