# The README's commands. Each does the set-up it needs first (idempotent).
.PHONY: setup demo test test-fast airflow

setup:
	@bash scripts/setup.sh

demo: setup
	@.venv/bin/correlake demo

test: setup
	@.venv/bin/python -m pytest

# the unit and Spark tiers: no Airflow, no long-lived driver, no crash or server tests
test-fast: setup
	@.venv/bin/python -m pytest tests/unit tests/spark

airflow:
	@bash scripts/airflow.sh
