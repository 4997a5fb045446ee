"""Message uniqueness (semantics rule 7), one sequential pass per key. Pure Python."""

from __future__ import annotations

from correlake.semantics.buffer import deadline, is_buffered


def dedup_messages(messages):
    """Yield `(position, duplicate_of)` for messages sorted by (published_at, position).

    All messages given share `(tenant_id, correlation_key)`. A message with a
    `message_id` is a duplicate of the accepted message with the same name and
    id that is still buffered at its publish time (rule 6); `duplicate_of` is then that
    message's position, else None (accepted).
    """
    last: dict[tuple, tuple[int, int, int]] = {}  # (name, message_id) -> last accepted (ttl_ms, deadline, position)
    for m in messages:
        message_id = m["message_id"]
        if message_id is None:
            yield m["position"], None
            continue
        slot = (m["name"], message_id)
        holder = last.get(slot)
        if holder is not None and is_buffered(holder[0], holder[1], m["published_at"]):
            yield m["position"], holder[2]
            continue
        last[slot] = (m["ttl_ms"], deadline(m["published_at"], m["ttl_ms"]), m["position"])  # none before is buffered
        yield m["position"], None
