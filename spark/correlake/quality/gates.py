"""Data-quality gates between the stages, with the Great Expectations suites of `expectations/`.

Each gate builds derived frames in Spark (the columns a condition reads, cross-table
conditions as boolean columns); one Spark query counts the rows that break each
condition of its suites (`metrics.py`), and GX validates that one-row frame of counts.
Results are kept in `<lake>/_quality/validation_results`, each with its page in
the Data Docs site `<lake>/_quality/data_docs`, whose index lists the latest ones;
`correlake maintain` removes those past its retention.
A failing gate raises `GateFailed`; gates run before any write, so the run is discarded.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from datetime import datetime, timedelta, timezone
from functools import cache, reduce
from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from correlake.config import DATA_DOCS_INDEX_VALIDATIONS, data_docs_dir, validation_results_dir
from correlake.errors import EXIT_GATE, CorrelakeError
from correlake.lake.files import flocked
from correlake.lake.sqlfiles import buffered
from correlake.quality import metrics
from correlake.semantics.start_events import start_instance_key_sql


class GateFailed(CorrelakeError):
    """A data-quality gate stopped the run; nothing of the run was kept (bad data stays bad: no retry)."""

    exit_code = EXIT_GATE

    def __init__(self, gate: str, report: str):
        super().__init__(f"data-quality gate '{gate}' failed\n{report}")
        self.gate = gate
        self.report = report

    def __reduce__(self):  # it travels back from a driver (driver.py) as itself
        return GateFailed, (self.gate, self.report)


# -- the frames each gate validates (pure DataFrame functions) -------------------------
FRAME_KEYS = {  # each suite's frame, and what names its rows in a failure's examples
    "bronze": ["stream", "position"], "silver": ["message_key"],
    "gold_correlations": ["message_key", "bpmn_process_id"],
    "gold_subscriptions": ["tenant_id", "element_instance_key", "message_name"],
    "gold_started_instances": ["tenant_id", "process_instance_key"]}


def bronze_frames(messages: DataFrame, events: DataFrame) -> dict[str, DataFrame]:
    """Records this run added to bronze (replays excluded), both streams in one frame."""
    m = messages.select(F.lit("messages").alias("stream"), "position", "tenant_id", F.lit("MESSAGE").alias("kind"),
                        F.col("published_at").alias("event_time"), "ttl_ms", F.lit(None).cast("string").alias(
                            "element_type"), F.col("correlation_key").isNotNull().alias("routing_key_ok"))
    opens = F.col("type") == "SUBSCRIPTION_OPENED"
    w = events.select(F.lit("workflow_events").alias("stream"), "position", "tenant_id", F.col("type").alias("kind"),
                      F.col("timestamp").alias("event_time"), F.lit(0).cast("bigint").alias("ttl_ms"), "element_type",
                      F.when(opens, F.col("correlation_key").isNotNull()).otherwise(True).alias("routing_key_ok"))
    return {"bronze": m.unionByName(w)}


def silver_frames(messages: DataFrame) -> dict[str, DataFrame]:
    """Silver messages with rule 7 checked both ways: no accepted message overlaps a buffered
    one with its id, and every rejected one names such a message."""
    accepted_with_id = F.col("duplicate_of").isNull() & F.col("message_id").isNotNull()
    w = (Window.partitionBy("tenant_id", "name", "correlation_key", "message_id")
         .orderBy("published_at", "message_key").rowsBetween(Window.unboundedPreceding, -1))
    # of the earlier accepted ones with the id, the last to leave the buffer: if any is
    # buffered at this one's publish, that one is
    last_to_leave = F.max(F.when(accepted_with_id, F.struct("deadline", "ttl_ms"))).over(w)
    overlaps = accepted_with_id & F.coalesce(
        F.expr(buffered("published_at", "_last_to_leave.ttl_ms", "_last_to_leave.deadline")), F.lit(False))
    first = messages.select(*(F.col(c).alias(f"first_{c}") for c in (
        "message_key", "tenant_id", "name", "correlation_key", "message_id", "published_at", "ttl_ms", "deadline",
        "duplicate_of")))
    rejection_ok = F.col("duplicate_of").isNull() | F.coalesce(
        F.col("first_duplicate_of").isNull()
        & (F.col("first_tenant_id") == F.col("tenant_id")) & (F.col("first_name") == F.col("name"))
        & (F.col("first_correlation_key") == F.col("correlation_key"))
        & (F.col("first_message_id") == F.col("message_id"))
        & (F.struct("first_published_at", "first_message_key") < F.struct("published_at", "message_key"))
        & F.expr(buffered("published_at", "first_ttl_ms", "first_deadline")), F.lit(False))
    deadline_ok = F.col("deadline") == F.timestamp_millis(F.unix_millis("published_at") + F.col("ttl_ms"))
    return {"silver": messages.withColumn("_last_to_leave", last_to_leave)
            .join(first, F.col("duplicate_of") == F.col("first_message_key"), "left").select(
        "message_key", "correlation_key", F.coalesce(deadline_ok, F.lit(False)).alias("deadline_ok"),
        overlaps.alias("overlaps_buffered_duplicate"), rejection_ok.alias("rejection_justified"))}


def gold_frames(tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Correlations checked against their message, and their subscription (CATCH) or started
    instance (START); subscriptions and started instances in their own frames."""
    c, m, s, i = (tables[n] for n in ("correlations", "messages", "subscriptions", "message_started_instances"))
    is_start = F.col("subscription_type") == "START"
    sub = s.select(*(F.col(n).alias(f"sub_{n}") for n in (
        "tenant_id", "element_instance_key", "message_name", "bpmn_process_id", "process_version",
        "process_instance_key", "element_id", "correlation_key", "opened_at", "closed_at")))
    inst = i.select(*(F.col(n).alias(f"inst_{n}") for n in (
        "tenant_id", "process_instance_key", "bpmn_process_id", "process_version", "message_key", "correlation_key",
        "started_at")))
    joined = (c.join(m.select(F.col("message_key").alias("m_key"), "ttl_ms", "published_at", "deadline",
                              "duplicate_of", F.col("variables").alias("m_variables")),
                     c.message_key == F.col("m_key"), "left")
              .join(sub, ~is_start & (c.tenant_id == F.col("sub_tenant_id"))
                    & (c.element_instance_key == F.col("sub_element_instance_key"))
                    & (c.message_name == F.col("sub_message_name")), "left")
              .join(inst, is_start & (c.tenant_id == F.col("inst_tenant_id"))
                    & (c.process_instance_key == F.col("inst_process_instance_key")), "left"))
    live = (F.col("correlated_at") == F.col("published_at")) | (  # rule 6 (and rule 22's instants)
        (F.col("correlated_at") > F.col("published_at")) & F.expr(buffered("correlated_at")))
    in_sub = F.when(is_start, True).otherwise(
        (F.col("correlated_at") >= F.col("sub_opened_at"))
        & (F.col("sub_closed_at").isNull() | (F.col("correlated_at") <= F.col("sub_closed_at"))))
    sub_fields = ("bpmn_process_id", "process_version", "process_instance_key", "element_id", "correlation_key")
    matches_sub = F.when(is_start, True).otherwise(
        F.col("sub_tenant_id").isNotNull() & _all(F.col(n).eqNullSafe(F.col(f"sub_{n}")) for n in sub_fields))
    inst_fields = ("bpmn_process_id", "process_version", "message_key", "correlation_key")
    matches_inst = F.when(~is_start, True).otherwise(
        F.col("element_instance_key").isNull() & F.col("element_id").isNull()
        & (F.col("process_instance_key") == F.expr(start_instance_key_sql("bpmn_process_id", "message_key")))
        & (F.col("correlated_at") == F.col("inst_started_at")) & _all(F.col(n) == F.col(f"inst_{n}") for n in inst_fields))
    correlations = joined.select(
        c.message_key, c.bpmn_process_id, "subscription_type",
        (F.col("published_at").isNotNull() & F.col("duplicate_of").isNull()
         & (F.col("message_published_at") == F.col("published_at"))
         & F.col("variables").eqNullSafe(F.col("m_variables"))).alias("message_accepted"),
        *(F.coalesce(v, F.lit(False)).alias(n) for n, v in (
            ("in_message_window", live), ("in_subscription_window", in_sub), ("matches_subscription", matches_sub),
            ("matches_started_instance", matches_inst))))
    return {"gold_correlations": correlations, "gold_subscriptions": _subscriptions_frame(c, s),
            "gold_started_instances": _started_instances_frame(i)}


def _subscriptions_frame(c: DataFrame, s: DataFrame) -> DataFrame:
    """Subscriptions against the correlations they took and rules 12-13: an interrupting one
    takes one message and closes CORRELATED at it, and its owner's other subscriptions
    (of an event subprocess: the scope's other event subprocesses) close by then."""
    key = ["tenant_id", "element_instance_key", "message_name"]
    taken = (c.where("subscription_type = 'CATCH'").groupBy(*key)
             .agg(F.count("*").alias("taken"), F.max("correlated_at").alias("last_taken_at")))
    esp = F.col("element_type") == "EVENT_SUBPROCESS"
    leavers = s.where(F.col("close_reason") == "CORRELATED").select(
        F.col("tenant_id").alias("l_tenant_id"), F.col("element_instance_key").alias("l_owner"),
        esp.alias("l_esp"), F.col("closed_at").alias("left_at"))
    left = (s.join(leavers, (F.col("tenant_id") == F.col("l_tenant_id"))
                   & (F.col("element_instance_key") == F.col("l_owner")) & (~F.col("l_esp") | esp))
            .groupBy(*key).agg(F.min("left_at").alias("left_at")))
    correlated_close = F.col("interrupting") & (F.col("taken") >= 1) & (F.col("closed_at") == F.col("last_taken_at"))
    close_ok = (F.col("closed_at").isNull() == F.col("close_reason").isNull()) & \
        F.when(F.col("close_reason") == "CORRELATED", correlated_close).otherwise(True)
    closed_with_owner = F.col("left_at").isNull() | (F.col("opened_at") > F.col("left_at")) | \
        (F.col("closed_at") <= F.col("left_at"))
    return (s.join(taken, key, "left").join(left, key, "left").withColumn("taken", F.coalesce("taken", F.lit(0)))
            .select(*key, "opened_at", "closed_at", "close_reason",
                    *(F.coalesce(v, F.lit(False)).alias(n) for n, v in (
                        ("count_matches", F.col("correlation_count") == F.col("taken")),
                        ("close_consistent", close_ok), ("closed_with_owner", closed_with_owner))),
                    (F.col("interrupting") & (F.col("taken") > 1)).alias("interrupting_overflow")))


def _started_instances_frame(i: DataFrame) -> DataFrame:
    """Started instances against the lock of rules 19 and 21: each starts once the one before
    it, for the same process and non-empty key, has ended."""
    held = (Window.partitionBy("tenant_id", "bpmn_process_id", "correlation_key")  # ended at its start: first
            .orderBy("started_at", F.col("ended_at").asc_nulls_last(), "message_key"))
    lock_ok = (F.col("correlation_key") == "") | F.coalesce(
        F.lag("ended_at").over(held) <= F.col("started_at"), F.lag("message_key").over(held).isNull())
    return i.select("tenant_id", "process_instance_key", "started_at", "ended_at", lock_ok.alias("lock_ok"))


def _all(conditions):
    """The conjunction of some column conditions."""
    return reduce(lambda a, b: a & b, conditions)


# -- validation ----------------------------------------------------------------------
def _gx():
    """Great Expectations, its usage statistics off unless GX_ANALYTICS_ENABLED says otherwise
    (it reads the variable when first imported)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations

    return great_expectations


def import_ahead() -> threading.Thread | None:
    """Import Great Expectations on a thread of its own (None: imported already). It takes
    a fresh process ~5 s (SciPy, Altair, SQLAlchemy); started as a run begins, it is done
    while the stage before the first gate keeps Spark busy. pandas and pyarrow, which the
    run's thread imports too, are imported first, on the caller's thread: the two threads
    then have only leaf modules in common (measured: `encodings.idna`, `stringprep`), so
    no concurrent import cycle."""
    if "great_expectations" in sys.modules:
        return None
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401

    def load():
        try:
            _gx()
        except Exception:  # noqa: BLE001  (the first gate imports it again and says why)
            pass

    thread = threading.Thread(target=load, name="import-great-expectations", daemon=True)
    thread.start()
    return thread


def load_suite(name: str):
    """A suite from `expectations/<name>.json`, each expectation described by its condition
    (Data Docs show that); an unknown expectation type is an error."""
    gx = _gx()
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    def description(kwargs: dict) -> str:
        c = metrics.conditions(name)[kwargs["column"]]
        return f"{c.metric}: at most {kwargs['max_value']} {c.describe()}" + (f" (rule {c.rule})" if c.rule else "")

    spec = metrics.suite_spec(name)
    expectations = [ExpectationConfiguration(**{k: v for k, v in e.items() if k != "id"},
                                             description=description(e["kwargs"])).to_domain_obj()
                    for e in spec["expectations"]]
    return gx.ExpectationSuite(name=spec["name"], expectations=expectations, meta=spec.get("meta"))


@cache
def _context(lake: str):
    """The lake's GX context: every suite of `expectations/` (an index build deletes the pages
    of suites it does not know) with its checkpoint and page, validation results kept in the
    lake (a page named by a failure outlives the process), an index of the latest ones."""
    gx = _gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_store("lake_results", {"class_name": "ValidationResultsStore", "store_backend": {
        "class_name": "TupleFilesystemStoreBackend", "base_directory": str(validation_results_dir(lake))}})
    context.validation_results_store_name = "lake_results"
    context.add_data_docs_site(site_name="correlake", site_config={
        "class_name": "SiteBuilder",
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder",
                               "validation_results_limit": DATA_DOCS_INDEX_VALIDATIONS},
        "site_section_builders": {"profiling": "None"},  # none here: it would list every result again
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(data_docs_dir(lake))},
    })
    source = context.data_sources.add_pandas("frames")
    for name in FRAME_KEYS:
        definition = context.validation_definitions.add(gx.ValidationDefinition(
            name=name, data=source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("whole"),
            suite=context.suites.add(load_suite(name))))
        context.checkpoints.add(gx.Checkpoint(name=name, validation_definitions=[definition],
                                              result_format="SUMMARY"))
    context.build_data_docs(site_names=["correlake"], build_index=False, resource_identifiers=_suite_pages())
    return context


def _suite_pages() -> list:
    from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

    return [ExpectationSuiteIdentifier(name=name) for name in FRAME_KEYS]


def validate(name: str, frame, lake: str) -> tuple[bool, dict[str, object], object]:
    """Validate a pandas frame of metrics against suite `name`: (success, the failed metrics
    with their observed values, result's identifier)."""
    context = _context(lake)
    result = context.checkpoints.get(name).run(batch_parameters={"dataframe": frame})
    (identifier, validation), = result.run_results.items()
    failed = {r.expectation_config.kwargs["column"]: (r.result or {}).get("observed_value")
              for r in validation.results if not r.success}
    return result.success, failed, identifier


def publish_docs(lake: str, identifiers: list) -> list[str]:
    """Write the Data Docs pages of these validations and the index (one build for a gate's
    suites); the path of each page."""
    context = _context(lake)
    context.build_data_docs(site_names=["correlake"], resource_identifiers=identifiers)
    pages = []
    for identifier in identifiers:
        urls = context.get_docs_sites_urls(resource_identifier=identifier, site_name="correlake")
        pages.append(urls[0]["site_url"].removeprefix("file://") if urls else "")
    return pages


def old_validations(lake: str | Path, retain_hours: float) -> list[Path]:
    """Validations run more than `retain_hours` ago, each suite's latest excepted, as
    `<suite>/<run name>/<run time>` folders (of results, and of pages)."""
    cutoff = datetime.now(timezone.utc) - timedelta(hours=retain_hours)
    results = validation_results_dir(lake)
    old = []
    for suite in results.glob("*"):
        runs = sorted((at, f) for run in suite.glob("*") for f in run.glob("*") if (at := _run_time(f)))
        old += [f.relative_to(results) for at, f in runs[:-1] if at < cutoff]
    return old


def _run_time(folder: Path) -> datetime | None:
    """When a validation ran: its folder's name (GX's run time, UTC); None for what GX did not write."""
    try:
        return datetime.strptime(folder.name, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def docs_guard(lake: str | Path):
    """The lake's validation results and Data Docs written by one process at a time: an
    index build deletes the pages of results it did not list, another process's newest among
    them (Airflow's gate tasks run outside the lake's run lock)."""
    folder = data_docs_dir(lake).parent
    folder.mkdir(parents=True, exist_ok=True)
    return flocked(folder / "docs.guard")


def remove_validations(lake: str | Path, validations: list[Path]) -> None:
    """Remove these validations' results and pages, and the empty folders GX leaves behind
    when it removes a page itself; then build the index without them."""
    with docs_guard(lake):
        for root in (validation_results_dir(lake), data_docs_dir(lake) / "validations"):
            for folder in validations:
                if (root / folder).exists():
                    shutil.rmtree(root / folder)
            for folder, _, _ in os.walk(root, topdown=False):
                if folder != str(root) and not os.listdir(folder):
                    os.rmdir(folder)
        if validations:  # the index is built with pages: the suites' (the validations' would render each again)
            _context(str(lake)).build_data_docs(site_names=["correlake"], resource_identifiers=_suite_pages())


def check(gate: str, frames: dict[str, DataFrame], lake: str) -> None:
    """Measure the conditions of a gate's suites on its frames and validate the metrics;
    raise GateFailed, with examples of the rows that break each failed condition, on any
    failing expectation."""
    import pandas as pd

    lake = str(lake)
    measured = metrics.measure(frames)
    with docs_guard(lake):
        results = {name: validate(name, pd.DataFrame([measured[name]]), lake) for name in frames}
        pages = publish_docs(lake, [identifier for _, _, identifier in results.values()])
    report = []
    for (name, (success, failed, _)), page in zip(results.items(), pages):
        if not success:
            report.append(f"suite '{name}' failed — Data Docs: {page}")
            for metric, value in failed.items():
                c = metrics.conditions(name)[metric]
                rule = f" [rule {c.rule}]" if c.rule else ""
                examples = c.examples(frames[name], FRAME_KEYS[name])
                report.append(f"  - {metric}{rule}: {value} unexpected, {c.describe()}; "
                              f"e.g. {json.dumps(examples)}")
    if report:
        raise GateFailed(gate, "\n".join(report))
