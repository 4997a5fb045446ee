"""What users touch: the CLI commands, the Airflow tasks, `correlake sql`, the report."""
