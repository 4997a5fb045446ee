"""Join hints: a run's small frames are broadcast, larger ones are left to the planner,
and the answer is the same either way."""

from __future__ import annotations

from support.helpers import compilations

from correlake.runtime import hints


def initial_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_small_frames_are_broadcast_and_large_ones_are_not(spark, monkeypatch):
    monkeypatch.setattr(hints, "BROADCAST_ROWS", 10)
    history = spark.range(100).withColumnRenamed("id", "k")
    new = spark.range(0, 30, 3).withColumnRenamed("id", "k")  # 10 rows: small
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # no broadcast unless hinted
    try:
        hinted = history.join(hints.broadcast_if_small(new)(new), "k")
        plain = history.join(hints.broadcast_if_small(new, history)(new), "k")  # history: 100 rows
        assert "BroadcastHashJoin" in initial_plan(hinted)
        assert "BroadcastHashJoin" not in initial_plan(plain)
        assert sorted(hinted.collect()) == sorted(plain.collect()) == [(k,) for k in range(0, 30, 3)]
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


def test_a_frame_counted_again_for_its_hint_compiles_nothing(spark):
    frame = spark.range(50).selectExpr("id % 7 AS k").localCheckpoint()
    assert hints.broadcast_if_small(frame) is hints.F.broadcast
    before = compilations(spark)
    assert hints.broadcast_if_small(frame) is hints.F.broadcast  # as the next run counts its frames
    assert compilations(spark) == before
