"""Correlations (semantics rules 15, 22): the gold/correlations rows, and the once-per-process
mark on the message (`Message.processes`) that rule 15 reads."""

from __future__ import annotations

from correlake.semantics.buffer import Message


class Correlations:
    """The gold/correlations rows of one partition's pass."""

    def __init__(self, tenant_id: str):
        self.tenant_id = tenant_id
        self.rows: list[dict] = []

    def record(self, m: Message, t: int, process: str, version: int, instance_key: str,
               element_instance_key: str | None, element_id: str | None, subscription_type: str) -> None:
        """Rule 22: `m` correlated at `t` with `process` (rule 15: never again with it)."""
        m.processes.add(process)
        self.rows.append({
            "message_key": m.position,
            "tenant_id": self.tenant_id,
            "message_name": m.name,
            "correlation_key": m.key,
            "bpmn_process_id": process,
            "process_version": version,
            "process_instance_key": instance_key,
            "element_instance_key": element_instance_key,
            "element_id": element_id,
            "subscription_type": subscription_type,
            "correlated_at": t,
            "message_published_at": m.t,
            "variables": m.variables,
        })
