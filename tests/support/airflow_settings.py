"""The Airflow of the tests (the integration tier's `airflow_home` and the tests that start
Airflow's own processes): its command, its admin's password, the settings of a home."""

from __future__ import annotations

import sys
from pathlib import Path

AIRFLOW_PASSWORD = "correlake-test"
AIRFLOW_BIN = str(Path(sys.executable).with_name("airflow"))


def airflow_env(home: Path) -> dict[str, str]:
    """Airflow settings of a test home: this repo's dags/, no example DAGs."""
    return {"AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).resolve().parents[2] / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
