"""What `publish` writes: a `WritePlan`, decided without Spark from what the run found
(`plan_writes`), then carried out (`apply`) on a few threads, the longest first."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from correlake.config import GOLD_TABLES, STREAMS, table_path
from correlake.contract.schemas import GOLD, GOLD_KEYS, KEY_GROUPS, OUTBOX, SCOPE
from correlake.lake import tables
from correlake.lake.restate import restate
from correlake.session import run_concurrently
from correlake.transforms.gold import messages_at
from correlake.transforms.silver import SILVER_MESSAGE

if TYPE_CHECKING:
    from correlake.run.staged import StagedRun


class How(Enum):
    MERGE = "merge"          # the touched keys' rows restated (`lake/restate.py`)
    CREATE = "create"        # a table the lake does not have yet: the run's rows
    OVERWRITE = "overwrite"  # the run's rows replace the table's
    APPEND = "append"        # the run's new rows added
    REEVALUATE = "reevaluate"  # gold/messages whole: the touched keys' rows replaced, every status at the new as_of


@dataclass(frozen=True)
class Write:
    table: str
    how: How
    keys: tuple[str, ...] = ()  # a MERGE's: the columns that identify a row


@dataclass(frozen=True)
class WritePlan:
    writes: tuple[Write, ...]

    @property
    def tables(self) -> list[str]:
        return [w.table for w in self.writes]


# What a rebuild replaces: every silver and gold table.
REBUILT = ("silver_messages", "silver_workflow_events", "silver_deployments", "key_groups", *GOLD_TABLES)
MERGE_KEYS = {**GOLD_KEYS, "silver_messages": ["message_key"], "key_groups": SCOPE}
APPENDED = ("quarantine", "ingested_files", "silver_workflow_events", *(f"bronze_{s}" for s in STREAMS))


def plan_writes(versions: dict[str, int], rebuild: bool = False, deployments: int = 0,
                key_groups_changed: bool = True, as_of_moved: bool = False, outbox_events: int = 0) -> WritePlan:
    """The writes of a run over a lake whose tables are at `versions` (-1: none yet).
    A rebuild replaces silver and gold. Otherwise, the MERGEs first (they take longest):
    gold/messages re-evaluated whole if `as_of_moved`; key groups only if they changed;
    deployments replaced if the run brought some; the new records appended. Either way
    the run's `outbox_events` are appended to the outbox (created if the lake has none)."""
    if rebuild:
        return WritePlan(tuple(Write(name, How.OVERWRITE) for name in REBUILT) + _outbox(versions, outbox_events))

    def restated(name: str) -> Write:
        return (Write(name, How.CREATE) if versions[name] < 0
                else Write(name, How.MERGE, tuple(MERGE_KEYS[name])))

    writes = [restated(name) for name in GOLD_TABLES if name != "messages"]
    writes.append(Write("messages", How.REEVALUATE) if as_of_moved and versions["messages"] >= 0
                  else restated("messages"))
    writes.append(restated("silver_messages"))
    if versions["key_groups"] < 0 or key_groups_changed:
        writes.append(restated("key_groups"))
    if deployments or versions["silver_deployments"] < 0:  # a lake has every table
        writes.append(Write("silver_deployments", How.OVERWRITE))
    writes += [Write(name, How.APPEND) for name in APPENDED]
    return WritePlan(tuple(writes) + _outbox(versions, outbox_events))


def _outbox(versions: dict[str, int], events: int) -> tuple[Write, ...]:
    """The outbox's write: created on a lake that has none (also empty: the lake has one
    from then on), else appended to if there are events (no empty commit)."""
    if versions["outbox"] < 0:
        return (Write("outbox", How.CREATE),)
    return (Write("outbox", How.APPEND),) if events else ()


# of the tables a run restates or creates
SCHEMAS = {**GOLD, "silver_messages": SILVER_MESSAGE, "key_groups": KEY_GROUPS, "outbox": OUTBOX}


def apply(plan: WritePlan, run: StagedRun) -> None:
    """Carry out the plan with the run's frames (the caller journals the writes)."""
    touched = run.frame("touched_keys").select(*SCOPE)
    run_concurrently([lambda w=w: _write(run, w, touched) for w in plan.writes])


def _write(run: StagedRun, write: Write, touched) -> None:
    spark, lake, name, run_id = run.spark, run.lake_dir, write.table, run.run_id
    if write.how is How.APPEND:
        return tables.append(run.frame(name), lake, name, run_id)
    if write.how is How.OVERWRITE:
        return tables.overwrite(run.frame(name), lake, name, run_id)
    rows = run.frame(name).select(*SCHEMAS[name].fieldNames())  # the table's columns
    if write.how is How.CREATE:
        tables.create(rows, lake, name, run_id)
    elif write.how is How.REEVALUATE:
        current = tables.read(spark, lake, name, GOLD[name])
        tables.overwrite(messages_at(current, run.result.as_of, rows, touched), lake, name, run_id)
    else:  # key groups: the groups that changed; the other tables: the keys the run touched
        keys = run.frame(name).select(*SCOPE) if name == "key_groups" else touched
        restate(spark, table_path(lake, name), rows, keys, list(write.keys))
