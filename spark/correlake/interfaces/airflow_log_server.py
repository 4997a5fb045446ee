"""Airflow's log server on loopback, for `make airflow` (scripts/airflow.sh). Run as
`python -m correlake.interfaces.airflow_log_server`.

Airflow 3.3's scheduler and triggerer each start a log server bound to every interface
(`airflow.utils.serve_logs.serve_logs` binds "" with no setting to change it). The launcher
starts them with `--skip-serve-logs` and this one instead: Airflow's own log app
(`airflow.utils.serve_logs.create_app`, requests signed with `[api] secret_key`) on
127.0.0.1, port `[logging] worker_log_server_port`, where the triggerer's logs are asked
for too (`[logging] trigger_log_server_port` set to the same port). The API server asks
`http://<the task's hostname>:<port>/log/…` for the logs of a running or deferred task:
`hostname` below, Airflow's `[core] hostname_callable`, names this address."""

from __future__ import annotations

LOOPBACK = "127.0.0.1"


def hostname() -> str:
    """The host name Airflow's components record for their tasks: where the log server listens."""
    return LOOPBACK


def main() -> None:
    import uvicorn
    from airflow.configuration import conf
    from airflow.utils.serve_logs import create_app

    uvicorn.run(create_app(), host=LOOPBACK, port=conf.getint("logging", "worker_log_server_port"), access_log=False)


if __name__ == "__main__":
    main()
