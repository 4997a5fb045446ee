"""The buffered predicate (rules 6, 7, 23) is spelled once in SQL (`sql/rules/buffered.sql`)
and once in Python (`semantics.buffer.is_buffered`): both give the same answer on a grid of
TTLs, deadlines and instants. The SQL is evaluated by DuckDB here (no Spark in this tier);
it is plain comparisons, which Spark SQL evaluates alike (the Spark tests run it in the
status and the views)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import duckdb

from correlake.lake.sqlfiles import buffered, fill
from correlake.semantics.buffer import deadline, is_buffered

T0 = 1_767_225_600_000  # 2026-01-01, epoch millis


def grid():
    """(ttl_ms, deadline, t): TTL zero or positive; the deadline before, at or after t."""
    for ttl_ms, t, offset in itertools.product((0, 1, 60_000), (T0, T0 + 59_999, T0 + 60_000), (-1, 0, 1)):
        yield ttl_ms, t + offset, t
    for ttl_ms, t in itertools.product((0, 1, 60_000), (T0 - 1, T0, T0 + 1, T0 + 60_000)):
        yield ttl_ms, deadline(T0, ttl_ms), t  # a message published at T0


def _sql(expression: str, rows: list[tuple], columns: str) -> list:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE g ({columns})")
    con.executemany(f"INSERT INTO g VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return [r[0] for r in con.execute(f"SELECT {expression} FROM g ORDER BY i").fetchall()]


def test_sql_and_python_agree_on_epoch_millis():
    rows = [(i, *g) for i, g in enumerate(grid())]
    got = _sql(buffered("t"), rows, "i INTEGER, ttl_ms BIGINT, deadline BIGINT, t BIGINT")
    assert got == [is_buffered(ttl, d, t) for _, ttl, d, t in rows]
    assert True in got and False in got


def test_sql_and_python_agree_on_timestamps_as_gold_holds_them():
    def ts(ms):  # naive UTC, as DuckDB's TIMESTAMP
        return datetime(1970, 1, 1) + timedelta(milliseconds=ms)

    rows = [(i, ttl, ts(d), ts(t)) for i, (ttl, d, t) in enumerate(grid())]
    got = _sql(buffered("as_of"), rows, "i INTEGER, ttl_ms BIGINT, deadline TIMESTAMP, as_of TIMESTAMP")
    assert got == [is_buffered(ttl, d, t) for ttl, d, t in grid()]


def test_the_status_of_an_accepted_uncorrelated_message_is_the_predicate():
    rows = [(i, ttl, d, t, None, 0) for i, (ttl, d, t) in enumerate(grid())]
    got = _sql(fill("message_status"), rows,
               "i INTEGER, ttl_ms BIGINT, deadline BIGINT, as_of BIGINT, duplicate_of BIGINT, correlation_count INT")
    assert got == ["BUFFERED" if is_buffered(ttl, d, t) else "EXPIRED" for ttl, d, t in grid()]


def test_a_status_crosses_exactly_when_the_predicate_differs_at_the_two_instants():
    """`sql/rules/crosses.sql`, built on the predicate: as_of moved either way, an accepted
    uncorrelated message's status crosses when it is buffered at one instant and not the other."""
    instants = (T0 - 1, T0, T0 + 1, T0 + 60_000)
    rows = [(i, ttl, d, "BUFFERED" if is_buffered(ttl, d, before) else "EXPIRED", before, after, None, 0)
            for i, ((ttl, d, _), before, after) in enumerate(itertools.product(grid(), instants, instants))]
    crosses = fill("rules/crosses", before="b", after="a", status=fill("message_status", as_of="a"))
    got = _sql(crosses, rows, "i INTEGER, ttl_ms BIGINT, deadline BIGINT, status VARCHAR, b BIGINT, a BIGINT, "
                              "duplicate_of BIGINT, correlation_count INT")
    assert got == [is_buffered(ttl, d, b) != is_buffered(ttl, d, a) for _, ttl, d, _, b, a, *_ in rows]
    assert True in got and False in got
