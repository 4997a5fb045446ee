"""Message uniqueness (semantics rule 7), one sequential pass per key. Pure Python."""

from __future__ import annotations


def dedup_messages(messages):
    """Yield `(position, duplicate_of)` for messages sorted by (published_at, position).

    All messages given share `(tenant_id, correlation_key)`. A message with a
    `message_id` is a duplicate of the accepted message with the same name and
    id that is still buffered at its publish time; `duplicate_of` is then that
    message's position, else None (accepted).
    """
    live: dict[tuple, tuple[int, int]] = {}  # (name, message_id) -> (deadline, position)
    for m in messages:
        message_id = m["message_id"]
        if message_id is None:
            yield m["position"], None
            continue
        slot = (m["name"], message_id)
        holder = live.get(slot)
        if holder is not None and holder[0] > m["published_at"]:
            yield m["position"], holder[1]
            continue
        if m["ttl_ms"] > 0:
            live[slot] = (m["published_at"] + m["ttl_ms"], m["position"])
        yield m["position"], None
