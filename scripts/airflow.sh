#!/usr/bin/env bash
# One command, a local Airflow: the project's set-up, the demo landing, and
# `airflow standalone` (scheduler, DAG processor, triggerer, API server with the UI)
# on SQLite in .local/airflow, with this project's dags/, and a long-lived Spark driver
# (`correlake serve`) that the tasks run their stages on. Ctrl-C stops both.
#
#   CORRELAKE_DRIVER                       the driver's socket (default .local/driver.sock);
#                                          "none": each task starts its own Spark instead
#   AIRFLOW_PORT                           UI / REST API port (default 8080)
#   AIRFLOW__DATABASE__SQL_ALCHEMY_CONN    another metadata database, e.g.
#                                          postgresql+psycopg2://user:pw@localhost/airflow
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh

port="${AIRFLOW_PORT:-8080}"
export PATH="$root/.venv/bin:$PATH"  # standalone starts its components as `airflow ...`
export AIRFLOW_HOME="${AIRFLOW_HOME:-$root/.local/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$root/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False
export AIRFLOW__API__HOST="${AIRFLOW__API__HOST:-127.0.0.1}"
export AIRFLOW__API__PORT="$port"
export AIRFLOW__API__BASE_URL="http://localhost:$port"
export AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT="${AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT:-60}"  # busy machine, SQLite
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
mkdir -p "$AIRFLOW_HOME"

password="$(python - <<'EOF'
import json, os, secrets
from pathlib import Path

from correlake.config import demo_dir
from correlake.demo import write_demo_landing

write_demo_landing(demo_dir() / "landing")
path = Path(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
users = json.loads(path.read_text()) if path.exists() else {}
if "admin" not in users:
    users["admin"] = secrets.token_urlsafe(12)
    path.write_text(json.dumps(users) + "\n")
    path.chmod(0o600)
print(users["admin"])
EOF
)"

cat <<EOF
correlake: local Airflow starting (AIRFLOW_HOME=$AIRFLOW_HOME)
  UI and REST API  http://localhost:$port   (ready after ~30 s)
  log in as        admin / $password   (from $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE)
  DAG              correlake_hourly   landing .local/demo/landing, lake .local/airflow/lake
                   (Airflow Variables correlake_landing / correlake_lake to change them)
EOF
if [ "${CORRELAKE_DRIVER:-}" = none ]; then
  unset CORRELAKE_DRIVER
else
  export CORRELAKE_DRIVER="${CORRELAKE_DRIVER:-$root/.local/driver.sock}"
  correlake serve --socket "$CORRELAKE_DRIVER" >"$AIRFLOW_HOME/driver.log" 2>&1 &
  driver=$!
  trap 'kill "$driver" 2>/dev/null || true' EXIT
  echo "  Spark driver     $CORRELAKE_DRIVER (pid $driver, log $AIRFLOW_HOME/driver.log; warming up, ~1.5 min)"
fi
# Ctrl-C: `airflow standalone` leaves its components running on SIGINT but stops them on SIGTERM
airflow standalone &
standalone=$!
trap 'kill -TERM "$standalone" 2>/dev/null || true' INT TERM
wait "$standalone" || wait "$standalone"
