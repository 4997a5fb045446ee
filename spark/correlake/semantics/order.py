"""The total order of records (semantics rules 2-3), defined once.

Every record the engine handles has a kind and a place in one sequence sorted by
`SORT_COLUMNS`: event time, stream rank (workflow events 0, messages 1: rule 2; in a lake of
exporter records, ends 2), the
position it is handled at, its own position. The position it is handled at is its own,
except for a `SUBSCRIPTION_OPENED`: the lowest position of its rule-3 group (the opens
sharing tenant, element instance and event time). The Spark side sorts by these columns
(`transforms/gold.py`); the engine merges deployments into the same order.
"""

from __future__ import annotations

# Record kinds: a message publish, and the workflow event types (the contract's names).
from correlake.contract.enums import ELEMENT_LEFT, INSTANCE_ENDED, PROCESS_DEPLOYED, SUBSCRIPTION_OPENED  # noqa: F401

MESSAGE_PUBLISHED = "MESSAGE_PUBLISHED"

MESSAGE_RANK, WORKFLOW_RANK = 1, 0  # rule 2: at one instant, workflow events before messages
# a lake of exporter records (contract revision 4, *Mapping*): at one instant, ends after messages (the close
# an engine writes in the millisecond of the correlation that caused it must not overtake its cause)
END_RANK, ENDS = 2, (ELEMENT_LEFT, INSTANCE_ENDED)

# The sort, in order: (event time in millis, stream rank, position handled at, position).
TIME, RANK, GROUP_POSITION, POSITION = SORT_COLUMNS = ("t", "rank", "group_position", "position")


def rank(kind: str, ends_last: bool = False) -> int:
    """The stream rank of rule 2; `ends_last`: of a lake of exporter records, ends after messages."""
    if kind == MESSAGE_PUBLISHED:
        return MESSAGE_RANK
    return END_RANK if ends_last and kind in ENDS else WORKFLOW_RANK


def sort_key(t: int, kind: str, position: int, group_position: int | None = None) -> tuple:
    """A record's place in the total order; `group_position`: for an open, its group's
    lowest position (rule 3)."""
    return (t, rank(kind), position if group_position is None else group_position, position)


def record_sort_key(record: dict) -> tuple:
    """`sort_key` of an engine input record (keys `t`, `kind`, `position`, `group_position`; `rank`,
    when it has one, its rank as `rank` gave it)."""
    key = sort_key(record[TIME], record["kind"], record[POSITION], record.get(GROUP_POSITION))
    return key if record.get(RANK) is None else (key[0], record[RANK], *key[2:])


def deployment_sort_key(deployment: dict) -> tuple:
    """`sort_key` of a deployment (keys `t`, `position`)."""
    return sort_key(deployment[TIME], PROCESS_DEPLOYED, deployment[POSITION])
