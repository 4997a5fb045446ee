"""What `publish` writes: a `WritePlan`, decided without Spark from what the run found
(`plan_writes`); `StagedRun` carries it out."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from correlake.config import BRONZE_TABLES, ENGINE_STREAM, GOLD_TABLES
from correlake.contract.schemas import ENGINE_CORRELATION, GOLD, GOLD_KEYS, KEY_GROUPS, OUTBOX, SCOPE
from correlake.transforms.silver import SILVER_MESSAGE


class How(Enum):
    MERGE = "merge"          # the touched keys' rows restated (`lake/restate.py`)
    CREATE = "create"        # a table the lake does not have yet: the run's rows
    OVERWRITE = "overwrite"  # the run's rows replace the table's
    APPEND = "append"        # the run's new rows added
    REFRESH = "refresh"      # gold/messages: MERGE, also of the other rows whose status crosses
    RECORD = "record"        # rows the run holds in Python, one delta-rs commit: gold/as_of's, the files read
    EARLIEST = "earliest"    # gold/engine_correlations: per key, the earliest record's row (sql/engine_correlations.sql)


@dataclass(frozen=True)
class Write:
    table: str
    how: How
    keys: tuple[str, ...] = ()  # a MERGE's: the columns that identify a row
    as_of_before: int | None = None  # a REFRESH's: the as_of the table's statuses are at


@dataclass(frozen=True)
class WritePlan:
    writes: tuple[Write, ...]

    @property
    def tables(self) -> list[str]:
        return [w.table for w in self.writes]


# What a rebuild replaces: every silver and gold table (gold/as_of: its row recorded).
REBUILT = ("silver_messages", "silver_workflow_events", "silver_deployments", "key_groups", *GOLD_TABLES)
MERGE_KEYS = {**GOLD_KEYS, "silver_messages": ["message_key"], "key_groups": SCOPE}
APPENDED = ("quarantine", "silver_workflow_events", *BRONZE_TABLES.values())
# a lake of exporter records' (run/engine_silver.py): its definitions and pending records, replaced by each run
ENGINE_SILVER = ("silver_engine_definitions", "silver_engine_pending")


def plan_writes(versions: dict[str, int], rebuild: bool = False, deployments: int = 0,
                key_groups_changed: bool = True, as_of_moved: bool = False, as_of_before: int | None = None,
                outbox_events: int = 0, appended_rows: dict[str, int] | None = None, engine_input: bool = False,
                engine_correlations: int = 0, mapped: bool = False) -> WritePlan:
    """The writes of a run over a lake whose tables are at `versions` (-1: none yet).
    A rebuild replaces silver and gold. Otherwise, the MERGEs first (they take longest):
    if `as_of_moved` (from `as_of_before`), gold/as_of's row replaced and the statuses that
    cross refreshed; key groups only if they changed; deployments replaced if the run
    brought some; the files read recorded and the new records appended (not to an existing
    table `appended_rows` gives none: no empty commit). Either way the run's
    `outbox_events` are appended to the outbox (created if the lake has none), and its
    `engine_correlations` rows kept (`_engine`), and if it `mapped` exporter records, ENGINE_SILVER replaced."""
    engine = _engine(versions, engine_correlations, rebuild) + tuple(
        Write(name, How.OVERWRITE) for name in ENGINE_SILVER if mapped)
    if rebuild:
        return WritePlan(tuple(Write(name, How.OVERWRITE) for name in REBUILT) + (Write("as_of", How.RECORD),)
                         + engine + _outbox(versions, outbox_events))

    def restated(name: str) -> Write:
        return (Write(name, How.CREATE) if versions[name] < 0
                else Write(name, How.MERGE, tuple(MERGE_KEYS[name])))

    writes = [restated(name) for name in GOLD_TABLES if name != "messages"]
    refresh = as_of_moved and as_of_before is not None and versions["messages"] >= 0
    writes.append(Write("messages", How.REFRESH, tuple(MERGE_KEYS["messages"]), as_of_before) if refresh
                  else restated("messages"))
    if versions["as_of"] < 0 or as_of_moved:
        writes.append(Write("as_of", How.RECORD))
    writes.append(restated("silver_messages"))
    if versions["key_groups"] < 0 or key_groups_changed:
        writes.append(restated("key_groups"))
    if deployments or versions["silver_deployments"] < 0:  # a lake has every table
        writes.append(Write("silver_deployments", How.OVERWRITE))
    writes.append(Write("ingested_files", How.RECORD))
    writes += [Write(name, How.APPEND) for name in APPENDED if _appends(name, versions, appended_rows or {}, engine_input)]
    return WritePlan(tuple(writes) + engine + _outbox(versions, outbox_events))


def _engine(versions: dict[str, int], rows: int, rebuild: bool) -> tuple[Write, ...]:
    """gold/engine_correlations' write: none for a run without rows (a canonical lake has no
    such table); else created by the first run with rows, replaced by a rebuild, or its
    rows' MERGE."""
    if not rows:
        return ()
    if rebuild:
        return (Write("engine_correlations", How.OVERWRITE),)
    return (Write("engine_correlations", How.EARLIEST if versions["engine_correlations"] >= 0 else How.CREATE),)


def _appends(name: str, versions: dict[str, int], rows: dict[str, int], engine_input: bool) -> bool:
    """Whether the run appends to table `name`: a lake has every table (bronze/engine_records, a lake
    of exporter records: created by a run of `engine_input`), an existing one gets no empty commit."""
    if versions[name] < 0:
        return engine_input or name != BRONZE_TABLES[ENGINE_STREAM]
    return bool(rows.get(name, 1))


def _outbox(versions: dict[str, int], events: int) -> tuple[Write, ...]:
    """The outbox's write: created on a lake that has none (also empty: the lake has one
    from then on), else appended to if there are events (no empty commit)."""
    if versions["outbox"] < 0:
        return (Write("outbox", How.CREATE),)
    return (Write("outbox", How.APPEND),) if events else ()


# of the tables a run restates or creates
SCHEMAS = {**GOLD, "silver_messages": SILVER_MESSAGE, "key_groups": KEY_GROUPS, "outbox": OUTBOX,
           "engine_correlations": ENGINE_CORRELATION}
