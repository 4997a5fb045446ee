"""Data-quality gates between the stages, with the Great Expectations suites of `expectations/`.

Each gate builds small, derived frames in Spark (the columns an expectation needs,
cross-table conditions as boolean columns) and validates them with GX's pandas
engine; results go to a Data Docs site under `<lake>/_quality/data_docs`.
A failing gate raises `GateFailed`; gates run before any write, so the run is discarded.
"""

from __future__ import annotations

import json
import os
from functools import cache

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .config import data_docs_dir, expectations_dir

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


class GateFailed(RuntimeError):
    """A data-quality gate stopped the run; nothing of the run was kept."""

    def __init__(self, gate: str, report: str):
        super().__init__(f"data-quality gate '{gate}' failed\n{report}")
        self.gate = gate
        self.report = report

    def __reduce__(self):  # it travels back from a driver (driver.py) as itself
        return GateFailed, (self.gate, self.report)


# -- the frames each gate validates (pure DataFrame functions) -------------------------
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
    accepted_buffering = F.col("duplicate_of").isNull() & (F.col("ttl_ms") > 0) & F.col("message_id").isNotNull()
    w = (Window.partitionBy("tenant_id", "name", "correlation_key", "message_id")
         .orderBy("published_at", "message_key").rowsBetween(Window.unboundedPreceding, -1))
    earlier_deadline = F.max(F.when(accepted_buffering, F.col("deadline"))).over(w)
    overlaps = F.col("duplicate_of").isNull() & F.col("message_id").isNotNull() & \
        F.coalesce(earlier_deadline > F.col("published_at"), F.lit(False))
    return {"silver": messages.select("message_key", "correlation_key", "published_at", "deadline",
                                      overlaps.alias("overlaps_buffered_duplicate"))}


def gold_frames(tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    c, m, s = tables["correlations"], tables["messages"], tables["subscriptions"]
    joined = (c.join(m.select("message_key", "ttl_ms", "published_at", "deadline", "duplicate_of"), "message_key", "left")
              .join(s.select("tenant_id", "element_instance_key", F.col("message_name").alias("sub_name"),
                             "bpmn_process_id", "opened_at", "closed_at"),
                    (c.tenant_id == s.tenant_id) & (c.element_instance_key == s.element_instance_key)
                    & (c.message_name == F.col("sub_name")) & (c.bpmn_process_id == s.bpmn_process_id), "left"))
    live = F.when(F.col("ttl_ms") > 0, (F.col("correlated_at") >= F.col("published_at"))
                  & (F.col("correlated_at") < F.col("deadline"))) \
        .otherwise(F.col("correlated_at") == F.col("published_at"))
    in_sub = F.when(F.col("subscription_type") == "START", True).otherwise(
        (F.col("correlated_at") >= F.col("opened_at"))
        & (F.col("closed_at").isNull() | (F.col("correlated_at") <= F.col("closed_at"))))
    correlations = joined.select(
        c.message_key, c.bpmn_process_id, "subscription_type",
        (F.col("published_at").isNotNull() & F.col("duplicate_of").isNull()).alias("message_accepted"),
        F.coalesce(live, F.lit(False)).alias("in_message_window"),
        F.coalesce(in_sub, F.lit(False)).alias("in_subscription_window"))
    subscriptions = s.select("tenant_id", "element_instance_key", "message_name", "opened_at", "closed_at",
                             "close_reason", (F.col("interrupting") & (F.col("correlation_count") > 1))
                             .alias("interrupting_overflow"))
    return {"gold_correlations": correlations, "gold_subscriptions": subscriptions}


# -- validation ----------------------------------------------------------------------
def load_suite(name: str):
    """A suite from `expectations/<name>.json`; an unknown expectation type is an error."""
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    spec = json.loads((expectations_dir() / f"{name}.json").read_text())
    expectations = [ExpectationConfiguration(**{k: v for k, v in e.items() if k != "id"}).to_domain_obj()
                    for e in spec["expectations"]]
    return gx.ExpectationSuite(name=spec["name"], expectations=expectations, meta=spec.get("meta"))


@cache
def _context(docs_dir: str):
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_data_docs_site(site_name="correlake", site_config={
        "class_name": "SiteBuilder",
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs_dir},
    })
    context.data_sources.add_pandas("frames")
    return context


def validate(name: str, frame, docs_dir: str) -> tuple[bool, list[dict], str]:
    """Validate a pandas frame against suite `name`; return (success, failures, page path)."""
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction

    context = _context(docs_dir)
    source = context.data_sources.get("frames")
    if name in source.get_asset_names():
        batch_definition = source.get_asset(name).get_batch_definition("whole")
    else:
        batch_definition = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("whole")
        suite = context.suites.add(load_suite(name))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=name, data=batch_definition, suite=suite))
        context.checkpoints.add(gx.Checkpoint(name=name, validation_definitions=[definition],
                                              actions=[UpdateDataDocsAction(name="docs")],
                                              result_format="SUMMARY"))
    result = context.checkpoints.get(name).run(batch_parameters={"dataframe": frame})
    failures, page = [], ""
    for identifier, validation in result.run_results.items():
        urls = context.get_docs_sites_urls(resource_identifier=identifier, site_name="correlake")
        page = urls[0]["site_url"] if urls else ""
        for r in validation.results:
            if not r.success:
                info = r.result or {}
                failures.append({
                    "expectation": r.expectation_config.type,
                    "kwargs": {k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"},
                    "unexpected_count": info.get("unexpected_count"),
                    "examples": info.get("partial_unexpected_list", [])[:5],
                    "rule": (r.expectation_config.meta or {}).get("rule"),
                })
    return result.success, failures, page.removeprefix("file://")


def check(gate: str, frames: dict[str, DataFrame], lake: str) -> None:
    """Run the suites of a gate on its frames; raise GateFailed on any failing expectation."""
    docs_dir = str(data_docs_dir(lake))
    report = []
    for name, df in frames.items():
        success, failures, page = validate(name, df.toPandas(), docs_dir)
        if not success:
            report.append(f"suite '{name}' failed — Data Docs: {page}")
            for f in failures:
                rule = f" [rule {f['rule']}]" if f["rule"] else ""
                report.append(f"  - {f['expectation']} {json.dumps(f['kwargs'], default=str)}{rule}: "
                              f"{f['unexpected_count']} unexpected, e.g. {json.dumps(f['examples'], default=str)}")
    if report:
        raise GateFailed(gate, "\n".join(report))
