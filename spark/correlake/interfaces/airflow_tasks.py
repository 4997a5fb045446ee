"""The bodies of the Airflow DAGs' tasks (`airflow_dags.py`): each resolves its settings
from the Airflow context and calls a step of `correlake.run.stepwise` or
`correlake.run.maintenance.maintain` through `correlake.driver.client.call`: on a long-lived
driver when CORRELAKE_DRIVER names one, else in the task's process.

Imported only inside running tasks, so the DAG files stay free of Spark and GX.
`prepare` returns the run's handle (`{"run_id", "lake"}`, pushed to XCom) or None when
there is nothing new; the later tasks pull it from `prepare`'s XCom.
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import contextmanager
from urllib.parse import quote

from airflow.sdk import Variable
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from correlake.config import AIRFLOW_LOCK_WAIT_SECONDS, absolute, demo_dir, state_dir, table_path, validate
from correlake.contract.parsing import BadRecord, parse_time
from correlake.driver.client import call
from correlake.errors import CorrelakeError, UsageError
from correlake.lake import preflight
from correlake.quality.gates import GateFailed
from correlake.run import maintenance, stepwise
from correlake.run.result import RunResult, is_run_id
from correlake.run.store import staged_run
from correlake.run.summary import findings, summary
from correlake.text import escape_lines

log = logging.getLogger("correlake")


@contextmanager
def for_good(hint: str = "", drop: dict | None = None):
    """correlake's errors that a retry would meet again (`CorrelakeError.retryable`) fail the
    task for good, their message followed by `hint`, the staged run `drop` dropped; the
    others (a busy lake, a driver gone, anything unexpected) are left to Airflow's retries."""
    try:
        yield
    except CorrelakeError as exc:
        if exc.retryable:
            raise
        if drop is not None:
            staged_run(drop["lake"], drop["run_id"]).clear()
        raise AirflowFailException(f"{exc}{hint}") from None


def locations() -> tuple[str, str]:
    """(landing, lake): the Airflow Variables `correlake_landing`, `correlake_lake`, or the
    defaults; UsageError for one outside the allowed root (`config.allowed_roots`)."""
    landing = Variable.get("correlake_landing", default=str(demo_dir() / "landing"))
    lake = Variable.get("correlake_lake", default=str(state_dir() / "airflow" / "lake"))
    for name, path in (("correlake_landing", landing), ("correlake_lake", lake)):
        preflight.require_allowed(path, f"Airflow Variable {name}:")
    return absolute(landing), absolute(lake)


def checked_inputs(context) -> tuple[str, str]:
    """What a DAG run's first task checks before any work: the run's conf holds only the DAG's
    params (a typo would fall back to a default: `dryrun` would publish), the environment's
    settings are usable (`config.validate`), the Variables' folders are allowed. (landing,
    lake), or the task fails without retry (a retry would meet the same)."""
    if unknown := sorted(set(context["dag_run"].conf or {}) - set(context["dag"].params)):
        raise AirflowFailException(f"unknown params {unknown}: this DAG takes {sorted(context['dag'].params)}")
    with for_good():
        validate()
        return locations()


def as_of_millis(as_of: str | None, run_type: str, data_interval_end) -> int | None:
    """The run's `as_of`: the param if given, else a scheduled run's data interval end,
    else None (a manual run evaluates statuses at the latest event time, as the CLI does)."""
    if as_of:
        try:
            return parse_time(as_of, "as_of")
        except BadRecord as exc:
            raise AirflowFailException(f"param as_of: {exc} (use ISO-8601 with an offset)") from None
    if run_type == "scheduled" and data_interval_end is not None:
        return int(data_interval_end.timestamp() * 1000)
    return None


def _run(context) -> dict:
    """`prepare`'s XCom, checked again before a task reads or drops the run it names (others
    than this DAG may write XCom): a run id as `prepare` makes them, of the configured lake;
    else the task fails for good, nothing touched."""
    run = context["ti"].xcom_pull(task_ids="prepare")
    with for_good():
        lake = locations()[1]
    if not (isinstance(run, dict) and run.get("lake") == lake and is_run_id(run.get("run_id"))):
        raise AirflowFailException(f"prepare's XCom is not a run of the configured lake {lake} (Airflow Variable "
                                   "correlake_lake): refused, nothing read or deleted")
    return run


def _staged_run(context) -> dict:
    """The run `prepare` planned, still staged; else a failure without retry."""
    run = _run(context)
    if not staged_run(run["lake"], run["run_id"]).has_plan():
        raise AirflowFailException(f"run {run['run_id']} is no longer staged (a gate failed and dropped it, or it "
                                   "was published): clear this DAG run from 'prepare', or trigger a new one")
    return run


def prepare(context) -> dict | None:
    """Plan the run (a rebuild reads bronze only); None, so the later tasks skip, when nothing is new
    (statuses are then re-evaluated if as_of moved, outside a dry run)."""
    params = context["params"]
    landing, lake = checked_inputs(context)
    rebuild = params["rebuild"]
    with for_good(" (Airflow Variables correlake_landing, correlake_lake)"):
        warning = preflight.check_run(None if rebuild else landing, lake, params.get("full_listing", False))
    as_of = as_of_millis(params.get("as_of"), context["dag_run"].run_type, context.get("data_interval_end"))
    print(f"landing {landing}, lake {lake}, as_of {as_of}, params {dict(params)}")
    if warning:
        log.warning(escape_lines(warning))
    with for_good():
        planned = call(stepwise.prepare, None if rebuild else landing, lake, as_of=as_of,
                       max_quarantine_ratio=params.get("max_quarantine_ratio"), rebuild=rebuild,
                       dry_run=params["dry_run"], full_listing=params.get("full_listing", False))
    if isinstance(planned, RunResult):
        print(summary(planned))
        print("the later tasks are skipped")
        return None
    return {"run_id": planned, "lake": lake}


def stage(context, name: str) -> None:
    run = _staged_run(context)
    call(stepwise.compute, run["lake"], run["run_id"], name)


def gate(context, name: str) -> None:
    """Pass the gate, or fail the task for good (no retry: bad data stays bad) and drop the run."""
    run = _staged_run(context)
    try:
        call(stepwise.check, run["lake"], run["run_id"], name)
    except GateFailed as exc:
        staged_run(run["lake"], run["run_id"]).clear()
        for line in f"FAILED — {exc}".splitlines():  # one log line per line of the report
            log.error(escape_lines(line))
        raise AirflowFailException(f"data-quality gate '{exc.gate}' failed (report above); nothing of run "
                                   f"{run['run_id']} was published, gold is unchanged") from None
    print(f"gate {name}: passed")


def publish(context) -> dict:
    """Commit the run to the lake (or, in a dry run, drop it and skip); tag the gold asset events."""
    run = _staged_run(context)
    if context["params"]["dry_run"]:
        staged_run(run["lake"], run["run_id"]).clear()
        raise AirflowSkipException(f"dry run: every gate passed; run {run['run_id']} discarded, nothing published")
    with for_good(drop=run):
        result = call(stepwise.publish, run["lake"], run["run_id"])
    for asset in context["task"].outlets:
        table = asset.name.rsplit("/", 1)[-1]
        context["outlet_events"][asset].extra = {"path": table_path(run["lake"], table), "run_id": run["run_id"]}
    return dataclasses.asdict(result)


def stats(context) -> dict[str, int]:
    """The run's summary, what gold now holds, why what did not correlate did not, and (a lake of
    exporter records) where the engine differs: the counts by reason and by difference are also
    the task's return value (its XCom in the UI), so that a rise of one (a TTL too short, a
    producer's key in another case) shows from run to run."""
    from correlake.analysis import audit
    from correlake.analysis.report_data import reason_counts

    lake = _run(context)["lake"]
    print(summary(RunResult(**context["ti"].xcom_pull(task_ids="publish"))))
    print(call(findings, lake))
    counts = call(reason_counts, lake)
    print("why not correlated (view explanations; near misses: view near_misses):")
    print("\n".join(f"  {label:<45} {n}" for label, n in counts.items()) or "  every message and subscription "
          "took part in a correlation")
    if audit.has_engine_records(lake):  # a lake of exporter records: where the engine and correlake differ
        differences = audit.stats_counts(call(audit.audited, lake))
        print("the engine and correlake (view engine_differences, `correlake audit`):")
        print("\n".join(f"  {label:<45} {n}" for label, n in differences.items()) or "  no difference")
        counts.update(differences)
    return counts


def maintain(context) -> None:
    """Maintain the lake (skipped while there is none), waiting for a run that holds its lock;
    a retention under Delta's default is refused (only `correlake maintain --force` lowers it)."""
    params = context["params"]
    lake = checked_inputs(context)[1]
    try:
        preflight.check_retention(params["retain_hours"], False, "the DAG never lowers it: run "
                                  "`correlake maintain --retain-hours H --force` by hand")
    except UsageError as exc:
        raise AirflowFailException(f"param retain_hours: {exc}") from None
    try:
        preflight.require_folder(lake)
    except UsageError as exc:
        raise AirflowSkipException(f"{exc}: nothing to maintain yet (Airflow Variable correlake_lake)") from None
    with for_good():
        result = call(maintenance.maintain, lake, params["retain_hours"], params["dry_run"], AIRFLOW_LOCK_WAIT_SECONDS)
    print(maintenance.summary(result))


def delivery_sink() -> tuple[str, str, str | None]:
    """(kind, url, secret) of the one delivery sink configured as an Airflow Connection:
    `correlake_webhook` (its host: the URL, or the URL built from schema, host, port;
    its password: the signing secret) or `correlake_rabbitmq` (login, password, host,
    port, schema as the virtual host)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    from correlake.delivery.sinks import SINKS

    found = {}
    for kind in SINKS:
        try:
            found[kind] = Connection.get(f"correlake_{kind}")
        except AirflowNotFoundException:
            continue
    if not found:
        raise AirflowSkipException("no delivery sink: add the Airflow Connection correlake_webhook or correlake_rabbitmq")
    if len(found) > 1:
        raise AirflowFailException("both correlake_webhook and correlake_rabbitmq are set: a lake delivers to one sink")
    kind, conn = found.popitem()
    if kind == "webhook":
        url = conn.host if "://" in (conn.host or "") else f"{conn.schema or 'https'}://{conn.host}" + (
            f":{conn.port}" if conn.port else "")
        return kind, url, conn.password
    credentials = f"{quote(conn.login or 'guest', safe='')}:{quote(conn.password or 'guest', safe='')}"
    return kind, f"amqp://{credentials}@{conn.host}:{conn.port or 5672}/{quote(conn.schema or '/', safe='')}", None


def deliver(context) -> None:
    """One delivery pass on the hourly DAG's lake (skipped while another runs, or before
    any run published an outbox)."""
    from correlake.delivery import deliver as delivery
    from correlake.delivery.sinks import open_sink

    params, lake = context["params"], checked_inputs(context)[1]
    try:
        preflight.require_folder(lake)
    except UsageError as exc:
        raise AirflowSkipException(f"{exc}: nothing to deliver yet (Airflow Variable correlake_lake)") from None
    kind, url, secret = delivery_sink()
    settings = delivery.Settings(partitions=params["partitions"], max_seconds=params["max_seconds"])
    try:
        with for_good(), open_sink(kind, url, secret) as sink:
            result = delivery.deliver(lake, sink, settings)
    except delivery.DeliveryBusy as exc:  # the other pass delivers
        raise AirflowSkipException(str(exc)) from None
    print(delivery.summary(result))
