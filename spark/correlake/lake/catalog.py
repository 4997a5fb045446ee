"""A lake's tables under readable names, and the analyst views of `sql/views/`, as
Spark temp views: `gold_messages`, `silver_messages`, `quarantine`, `runs`, …"""

from __future__ import annotations

import itertools
import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from graphlib import TopologicalSorter
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from correlake.config import DELIVERY_TABLES, GOLD_TABLES, TABLES, sql_dir, table_path
from correlake.contract.ordering import ordering_key_column
from correlake.contract.schemas import ENGINE_CORRELATION, ENGINE_PENDING, ENGINE_RECORD
from correlake.errors import UsageError
from correlake.lake import sqlfiles, table_cache
from correlake.lake.journal import UNREADABLE_JOURNAL, journal_path, unfinished_run
from correlake.lake.preflight import require_folder
from correlake.lake.tables import is_table

# readable name -> logical table name of config.TABLES (and DELIVERY_TABLES); gold's are gold_<name>
TABLE_NAMES = {(f"gold_{name}" if TABLES.get(name, "").startswith("gold/") else name): name
               for name in (*TABLES, *DELIVERY_TABLES)}
REQUIRED = tuple(f"gold_{name}" for name in (*GOLD_TABLES, "as_of"))
# tables a lake may lack for good, read then as empty (a lake of canonical streams has no engine correlations)
EMPTY_WHEN_ABSENT = {"bronze_engine_records": ENGINE_RECORD, "gold_engine_correlations": ENGINE_CORRELATION,
                     "silver_engine_pending": ENGINE_PENDING}


class MissingTables(UsageError):
    """The lake lacks the gold tables (no committed run yet, or not a lake)."""


@dataclass(frozen=True)
class View:
    name: str
    doc: str  # the leading comment of its file
    sql: str
    reads: frozenset[str]  # the tables and views it reads

    @property
    def question(self) -> str:
        return self.doc.partition("?")[0] + "?"


def _names_in(text: str, names) -> set[str]:
    return {name for name in names if re.search(rf"\b{name}\b", text, re.IGNORECASE)}


@cache
def views() -> dict[str, View]:
    """The views of `sql/views/`, each after the views it reads."""
    texts = {path.stem: path.read_text() for path in sorted((sql_dir() / "views").glob("*.sql"))}
    found = {}
    for name, text in texts.items():
        doc = " ".join(line.removeprefix("--").strip() for line in itertools.takewhile(
            lambda line: line.startswith("--"), text.splitlines()))
        body = sqlfiles.fill(f"views/{name}")
        found[name] = View(name, doc, body, frozenset(_names_in(body, [*TABLE_NAMES, *texts]) - {name}))
    order = TopologicalSorter({name: view.reads & found.keys() for name, view in found.items()}).static_order()
    return {name: found[name] for name in order}


def require_gold(lake: str | Path) -> None:
    """UsageError if the lake folder is missing; MissingTables unless it has its gold
    tables (checked without Spark)."""
    require_folder(lake)
    missing = [name for name in REQUIRED if not is_table(table_path(lake, TABLE_NAMES[name]))]
    if missing:
        raise MissingTables(f"{lake} has no {', '.join(missing)} (not a lake, or no run has committed yet; "
                            "a lake of contract revision 1 gets gold_as_of from its next run)")


def unfinished_warning(lake: str | Path) -> str | None:
    """A warning for readers of a lake that a crashed run left half-written, or None."""
    if (run := unfinished_run(str(lake))) is None:
        return None
    if run == UNREADABLE_JOURNAL:
        return (f"correlake: warning: a run began to write and did not finish, and its journal "
                f"{journal_path(str(lake))} cannot be read: its tables may disagree with each other until "
                "restored by hand (`correlake run` says how)")
    return (f"correlake: warning: run {run} began to write and did not finish; until the next run (or "
            "`correlake maintain`) rolls it back, its tables may disagree with each other")


def _as_of_revision_3(name: str, table: DataFrame) -> DataFrame:
    """An outbox that no run of revision 3 has migrated yet, read with its ordering keys."""
    if name != "outbox" or "ordering_key" in table.columns:
        return table
    line = ordering_key_column(F.col("correlation_key"), F.col("message_key")).alias("ordering_key")
    return table.select(*(c for name in table.columns for c in ([name, line] if name == "correlation_key" else [name])))


def present(lake: str | Path) -> list[str]:
    """The names of the lake's tables and of the views over them (no Spark)."""
    found = [name for name, table in TABLE_NAMES.items()
             if name in EMPTY_WHEN_ABSENT or is_table(table_path(lake, table))]
    for view in views().values():  # each after the views it reads
        if view.reads <= set(found):
            found.append(view.name)
    return found


def register(spark, lake: str | Path, queries: list[str] | None = None) -> list[str]:
    """Register the lake's tables and the views that `queries` read (all when None), and
    no other: an earlier call's, of another lake perhaps, are dropped. Return the names
    registered. The gold tables must exist."""
    require_gold(lake)
    every = views()
    for name in (*TABLE_NAMES, *every):
        spark.catalog.dropTempView(name)
    wanted = set(TABLE_NAMES) | set(every) if queries is None else _names_in(" ".join(queries), [*TABLE_NAMES, *every])
    for view in reversed(every.values()):
        if view.name in wanted:
            wanted |= view.reads
    registered = []
    for name, table in TABLE_NAMES.items():
        if name in wanted and is_table(table_path(lake, table)):
            table_cache.read(spark, str(lake), table_path(lake, table),
                             lambda frame, name=name: _as_of_revision_3(name, frame)).createOrReplaceTempView(name)
            registered.append(name)
        elif name in wanted and name in EMPTY_WHEN_ABSENT:
            spark.createDataFrame([], EMPTY_WHEN_ABSENT[name]).createOrReplaceTempView(name)
            registered.append(name)
    for view in every.values():  # a view over a table the lake has not (yet): not registered
        if view.name in wanted and view.reads <= set(registered):
            _define(spark, view)
            registered.append(view.name)
    return registered


def _define(spark, view: View) -> None:
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {view.name} AS {view.sql}")


@contextmanager
def computed_once(spark, names: list[str], registered: list[str]):
    """Within the block, the registered views of `names` read from their rows computed once
    (checkpointed) instead of their queries, and the registered views that read them defined
    again over those rows: for several questions asked of a costly view (`explanations`).
    Yields the names of `names` so computed. After it, every view is its query again and
    the rows are left to Spark's cleaner."""
    stale: set[str] = set()
    for view in views().values():  # each after the views it reads
        if view.name in registered and (view.name in names or view.reads & stale):
            if view.reads & stale:
                _define(spark, view)
            if view.name in names:
                spark.table(view.name).localCheckpoint().createOrReplaceTempView(view.name)
            stale.add(view.name)
    try:
        yield [name for name in names if name in stale]
    finally:
        for view in views().values():
            if view.name in stale:
                _define(spark, view)
