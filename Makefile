# The README's commands. Each does the set-up it needs first (idempotent).
.PHONY: setup setup-s3 demo test test-fast airflow

setup:
	@bash scripts/setup.sh

# also the JARs of s3a:// (hadoop-aws, the AWS SDK: some 660 MB), which the S3 tests need
setup-s3:
	@bash scripts/setup.sh --s3

demo: setup
	@.venv/bin/correlake demo

test: setup-s3
	@.venv/bin/python -m pytest

# the unit and Spark tiers: no Airflow, no long-lived driver, no crash or server tests
test-fast: setup
	@.venv/bin/python -m pytest tests/unit tests/spark

airflow:
	@bash scripts/airflow.sh
