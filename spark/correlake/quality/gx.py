"""Great Expectations for the gates: the lake's context with every suite of `expectations/`,
validation of a gate's one-row frame of counts, the Data Docs pages, and their pruning.

Results are kept in `<lake>/_quality/validation_results`, each with its page in the Data
Docs site `<lake>/_quality/data_docs`, whose index lists the latest ones; `correlake
maintain` removes those past its retention (`old_validations`, `remove_validations`).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path

from correlake.config import DATA_DOCS_INDEX_VALIDATIONS, data_docs_dir, validation_results_dir
from correlake.lake.files import flocked
from correlake.quality import metrics
from correlake.quality.rules import FRAME_KEYS


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
    context.variables.save = lambda: None  # GX would write its whole configuration as YAML, at each addition
    # below, to a store in memory that nothing reads (an ephemeral context's is not kept)
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_store("lake_results", {"class_name": "ValidationResultsStore", "store_backend": {
        "class_name": "TupleFilesystemStoreBackend", "base_directory": str(validation_results_dir(lake))}})
    context.validation_results_store_name = "lake_results"
    context.add_data_docs_site(site_name="correlake", site_config={
        "class_name": "SiteBuilder",
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder", "view": _view("IndexPageView"),
                               "validation_results_limit": DATA_DOCS_INDEX_VALIDATIONS},
        "site_section_builders": {"expectations": {"view": _view("PageView")}, "validations": {"view": _view("PageView")},
                                  "profiling": "None"},  # none here: it would list every result again
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


def _view(name: str) -> dict:
    """A view of `docs_views`, which compiles GX's page templates once a process."""
    return {"module_name": "correlake.quality.docs_views", "class_name": name}


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
