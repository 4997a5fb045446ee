"""The correlation semantics, pure Python: no Spark, no I/O."""
