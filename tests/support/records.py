"""Builders of landing records for hand-written cases (times in seconds)."""

from __future__ import annotations

S = 1000  # one second in millis


def msg(pos, t, name="m", key="k", ttl=60 * S, mid=None, tenant=None):
    r = {"position": pos, "name": name, "correlation_key": key, "published_at": t * S, "ttl_ms": ttl}
    if mid:
        r["message_id"] = mid
    return _in(tenant, r)


def sub(pos, t, eik, name="m", key="k", process="p", pik="i", etype="INTERMEDIATE_CATCH_EVENT", interrupting=True,
        tenant=None, version=1):
    r = {"position": pos, "type": "SUBSCRIPTION_OPENED", "timestamp": t * S, "bpmn_process_id": process,
         "process_version": version, "process_instance_key": pik, "element_instance_key": eik, "element_id": eik,
         "element_type": etype, "message_name": name, "correlation_key": key, "interrupting": interrupting}
    return _in(tenant, r)


def left(pos, t, eik, tenant=None):
    return _in(tenant, {"position": pos, "type": "ELEMENT_LEFT", "timestamp": t * S, "element_instance_key": eik})


def ended(pos, t, pik, tenant=None):
    return _in(tenant, {"position": pos, "type": "INSTANCE_ENDED", "timestamp": t * S, "process_instance_key": pik})


def deploy(pos, t, process="p", version=1, starts=("m",), tenant=None):
    return _in(tenant, {"position": pos, "type": "PROCESS_DEPLOYED", "timestamp": t * S, "bpmn_process_id": process,
                        "process_version": version, "message_start_events": list(starts)})


def _in(tenant, record: dict) -> dict:
    if tenant is not None:
        record["tenant_id"] = tenant
    return record
