#!/usr/bin/env bash
# One command, a local Airflow: the project's set-up, the demo landing, and Airflow's
# components as `airflow standalone` would start them (scheduler, DAG processor, triggerer,
# API server with the UI) on SQLite in .local/airflow, with this project's dags/, and a
# long-lived Spark driver (`correlake serve`) that the tasks run their stages on. All of
# them listen on 127.0.0.1 only. Ctrl-C, or SIGTERM to this script, stops them all.
#
#   CORRELAKE_DRIVER                       the driver's socket (default .local/driver.sock);
#                                          "none": each task starts its own Spark instead
#   AIRFLOW_PORT                           UI / REST API port (default 8080)
#   AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT  the log server's port (default 8793)
#   AIRFLOW__DATABASE__SQL_ALCHEMY_CONN    another metadata database, e.g.
#                                          postgresql+psycopg2://user:pw@localhost/airflow
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh

port="${AIRFLOW_PORT:-8080}"
export PATH="$root/.venv/bin:$PATH"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$root/.local/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$root/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False
export AIRFLOW__API__HOST="${AIRFLOW__API__HOST:-127.0.0.1}"  # the UI and API on loopback unless told otherwise
export AIRFLOW__API__PORT="$port"
export AIRFLOW__API__BASE_URL="http://localhost:$port"
export AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT="${AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT:-60}"  # busy machine, SQLite
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
export AIRFLOW__CORE__EXECUTOR=LocalExecutor  # every component on this host, as under `airflow standalone`
# The log servers of the scheduler and the triggerer listen on every interface (Airflow 3.3 has no
# setting for their address): they are not started, and one on 127.0.0.1 serves both kinds of logs
# (correlake.interfaces.airflow_log_server), at the address the components record as their hostname.
export AIRFLOW__CORE__HOSTNAME_CALLABLE=correlake.interfaces.airflow_log_server.hostname
export AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT="${AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT:-8793}"
export AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT="$AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"
# AIRFLOW_HOME made private (0700), signing keys of 64 random bytes (read through
# AIRFLOW__…_CMD settings), the admin's password generated once and shown once, the demo landing
prepared="$(python -m correlake.interfaces.airflow_local)"
eval "$prepared"
airflow db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 || { cat "$AIRFLOW_HOME/db-migrate.log" >&2; exit 1; }

cat <<EOF
correlake: local Airflow starting (AIRFLOW_HOME=$AIRFLOW_HOME)
  UI and REST API  http://localhost:$port   (ready after ~30 s)
  task logs        served on 127.0.0.1:$AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT, in $AIRFLOW_HOME/logs
  log in as        $login
  DAG              correlake_hourly   landing ${AIRFLOW_VAR_CORRELAKE_LANDING:-.local/demo/landing}, lake ${AIRFLOW_VAR_CORRELAKE_LAKE:-.local/airflow/lake}
                   (Airflow Variables correlake_landing / correlake_lake to change them, within
                   ${CORRELAKE_ALLOWED_ROOT:-$root/.local}: CORRELAKE_ALLOWED_ROOT)
  DAG              correlake_maintenance   correlake maintain on that lake, daily at 03:30 UTC
EOF
set -m  # the driver and Airflow in process groups of their own, each stopped as a whole
driver=""
if [ "${CORRELAKE_DRIVER:-}" = none ]; then
  unset CORRELAKE_DRIVER
  export CORRELAKE_KEEP_DRIVER=0  # nor a kept one (spark/correlake/driver/kept.py)
else
  export CORRELAKE_DRIVER="${CORRELAKE_DRIVER:-$root/.local/driver.sock}"
  : >"$AIRFLOW_HOME/driver.log"
  (  # supervised: started again when it stops (its JVM gone, out of memory), unless it cannot start
    log="$AIRFLOW_HOME/driver.log"
    # the driver alone: it cancels and rolls back a call in progress (its JVM, in the group, must live meanwhile)
    trap 'kill -TERM "$serve" 2>/dev/null; wait "$serve"; exit 0' TERM
    failures=0
    while true; do
      lines=$(wc -l <"$log")
      correlake serve --socket "$CORRELAKE_DRIVER" >>"$log" 2>&1 &
      serve=$!
      wait "$serve" || true
      if tail -n +"$((lines + 1))" "$log" | grep -q "^correlake driver: serving"; then failures=0; else failures=$((failures + 1)); fi
      if [ "$failures" -ge 3 ]; then
        echo "correlake: the driver failed 3 times before serving (above); not started again: tasks run their" \
             "stages in their own processes" >>"$log"
        exit 1
      fi
      echo "correlake: the driver stopped; starting it again in 5 s" >>"$log"
      sleep 5
    done
  ) &
  driver=$!
  echo "  Spark driver     $CORRELAKE_DRIVER (log $AIRFLOW_HOME/driver.log; warming up, ~1.5 min;"
  echo "                   restarted if it stops; restart make airflow after changing code or expectations/)"
fi
components="$AIRFLOW_HOME/logs/components"
mkdir -p "$components"
echo "  component logs   $components/<scheduler|dag-processor|triggerer|api-server|log-server>.log"
echo "  stop             Ctrl-C, or kill -TERM $$"
echo "correlake: from here, one line per change of state (components up, each DAG run's end)"
component() {  # component NAME COMMAND...: COMMAND, its output appended to its log file
  local name=$1; shift
  "$@" >>"$components/$name.log" 2>&1
}
(  # Airflow and the lines that follow its state: one process group, stopped as a whole with SIGTERM
  set +m
  for name in scheduler dag-processor triggerer api-server log-server; do : >>"$components/$name.log"; done
  component scheduler airflow scheduler --skip-serve-logs &
  component dag-processor airflow dag-processor &
  component triggerer airflow triggerer --skip-serve-logs &
  component api-server airflow api-server &
  component log-server python -m correlake.interfaces.airflow_log_server &
  python -m correlake.interfaces.airflow_local --follow "$components" "http://localhost:$port" &
  wait
) 2>/dev/null &
airflow_group=$!

stop_group() {  # stop_group SIGNAL TARGET GROUP: SIGNAL to TARGET; what is left of GROUP after 30 s is killed
  kill -"$1" -- "$2" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 -- -"$3" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$3" 2>/dev/null || true
}

stop() {
  trap - INT TERM EXIT
  stop_group TERM -"$airflow_group" "$airflow_group"
  if [ -n "$driver" ]; then stop_group TERM "$driver" "$driver"; fi  # its supervisor: the driver alone, JVM kept
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
wait "$airflow_group"
