# The README's commands. Each does the set-up it needs first (idempotent).
.PHONY: setup demo test test-fast airflow

setup:
	@bash scripts/setup.sh

demo: setup
	@.venv/bin/correlake demo

test: setup
	@.venv/bin/python -m pytest

test-fast: setup
	@.venv/bin/python -m pytest -m "not slow"

airflow:
	@bash scripts/airflow.sh
