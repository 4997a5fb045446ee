"""Spark's code generation of row projections, switched per run by its size."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def row_projections(spark, interpreted: bool):
    """Spark's row projections evaluated rather than compiled within the block, if `interpreted`:
    a small run spends more generating their source than evaluating them, a large one gains from
    the compiled code, so it is the run's plan that decides, not the session (performance.md)."""
    key = "spark.sql.codegen.factoryMode"
    before = spark.conf.get(key)
    spark.conf.set(key, "NO_CODEGEN" if interpreted else before)
    try:
        yield
    finally:
        spark.conf.set(key, before)
