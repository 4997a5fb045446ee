"""Whether a run would change nothing, found without Spark: the lake's bookkeeping read
with delta-rs, the landing listed. A `correlake run` with no new landing file and no
`as_of` to move then answers in a second instead of starting a JVM. Whatever else the
lake needs (an unfinished run to roll back, a migration, a status refresh) is left to
the run itself."""

from __future__ import annotations

from correlake.lake import as_of as lake_as_of
from correlake.lake import discovery, meta
from correlake.lake.journal import unfinished_run
from correlake.run import outbox
from correlake.run.result import RunResult


def check(landing: str, lake: str, as_of: int | None = None, full_listing: bool = False) -> RunResult | None:
    """The result of a run that would find nothing new and leave `as_of` where it is, or
    None if the run has something to do (or this check cannot tell). It only reads, without
    the lake's lock (the run takes it once, if it runs): racing another run, it answers as
    the lake was before or after that run's publish (each table read is a Delta snapshot,
    and a run in progress is an unfinished one: something to do)."""
    if unfinished_run(lake) is not None:
        return None
    if lake_as_of.needs_migration(lake) or outbox.needs_migration(lake):
        return None
    if discovery.find(landing, lake, full_listing).files:
        return None
    target, before = lake_as_of.moves(lake, as_of, meta.last_event_time(lake))
    if before is not None:  # the statuses are re-evaluated at the new as_of
        return None
    return RunResult(None, nothing_new=True, as_of=target)
