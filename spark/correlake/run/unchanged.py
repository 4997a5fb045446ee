"""Whether a run would change nothing, found without Spark: the lake's bookkeeping read
with delta-rs, the landing listed. A `correlake run` with no new landing file and no
`as_of` to move then answers in a second instead of starting a JVM. Whatever else the
lake needs (an unfinished run to roll back, a migration, a status refresh) is left to
the run itself."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from correlake.config import table_path
from correlake.lake.journal import unfinished_run
from correlake.lake.landing import new_files
from correlake.run.result import RunResult


def _table(lake: str, name: str) -> DeltaTable | None:
    path = table_path(lake, name)
    return DeltaTable(path) if DeltaTable.is_deltatable(path) else None


def _max_millis(table: DeltaTable | None, column: str) -> int | None:
    """The column's greatest instant, in epoch millis (None: no table, or no value)."""
    if table is None:
        return None
    values = table.to_pyarrow_dataset().to_table(columns=[column])[column]
    top = pc.max(pc.cast(values, pa.timestamp("ms", "UTC"), safe=False)).as_py()
    return None if top is None else int(top.timestamp() * 1000)


def check(landing: str, lake: str, as_of: int | None = None) -> RunResult | None:
    """The result of a run that would find nothing new and leave `as_of` where it is, or
    None if the run has something to do (or this check cannot tell). The caller holds
    the lake's lock."""
    if unfinished_run(lake) is not None:
        return None
    as_of_table, messages = _table(lake, "as_of"), _table(lake, "messages")
    if as_of_table is None and messages is not None:  # revision 1: the run migrates it
        return None
    ingested = _table(lake, "ingested_files")
    known = set() if ingested is None else set(zip(*(
        ingested.to_pyarrow_dataset().to_table(columns=["path", "size", "modified_at"]).to_pydict().values())))
    if new_files(landing, known):
        return None
    target = as_of if as_of is not None else _max_millis(_table(lake, "runs"), "max_event_time")
    current = _max_millis(as_of_table, "as_of")
    if target is not None and current is not None and target != current:
        return None  # the statuses are re-evaluated at the new as_of
    return RunResult(None, nothing_new=True, as_of=target)
