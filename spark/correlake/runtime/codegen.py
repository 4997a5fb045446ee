"""Spark's code generation, switched per run."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def row_projections(spark, interpreted: bool):
    """Spark's row projections evaluated rather than compiled within the block, if `interpreted`.

    Outside whole-stage code, each task makes its own projections (the code that copies,
    serializes and deserializes rows), and Spark generates their source again for each
    one: only the compiled classes are cached. On a small run that takes a fifth of the
    JVM's time, more than evaluating them saves; a run of many rows gains from the
    compiled code. (`spark.sql.codegen.factoryMode`, an internal setting; Spark's own
    tests run its expressions both ways.)"""
    key = "spark.sql.codegen.factoryMode"
    before = spark.conf.get(key)
    spark.conf.set(key, "NO_CODEGEN" if interpreted else before)
    try:
        yield
    finally:
        spark.conf.set(key, before)
