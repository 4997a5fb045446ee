"""Data-quality gates between the stages (Great Expectations)."""
