"""`correlake audit`'s answer, also the report's section "The engine and correlake" and the
hourly DAG's counts: the view `engine_differences` (`sql/views/`) by difference and
explanation, and its first rows (`sql/report/engine_*.sql`)."""

from __future__ import annotations

from correlake.config import table_path
from correlake.lake.sqlfiles import fill
from correlake.lake.tables import is_table

QUERIES = {"counts": "engine_difference_counts", "rows": "engine_first_differences"}
SIDES = ("gold", "engine")  # an engine_differences row's two sides, the prefixes of their columns


def has_engine_records(lake: str) -> bool:
    """Whether the lake reads Zeebe exporter records (it has bronze/engine_records; no Spark)."""
    return is_table(table_path(lake, "bronze_engine_records"))


def audited(spark, lake: str) -> dict[str, list[dict]]:
    """The differences between gold/correlations and gold/engine_correlations: `counts` (rows
    of difference, explanation, n) and the first `rows` of `engine_differences`."""
    from correlake.lake.catalog import computed_once, register

    sql = {name: fill(f"report/{query}") for name, query in QUERIES.items()}
    registered = register(spark, lake, list(sql.values()))
    with computed_once(spark, ["engine_differences"], registered):
        return {name: [row.asDict() for row in spark.sql(text).collect()] for name, text in sql.items()}


def stats_counts(audit: dict[str, list[dict]]) -> dict[str, int]:
    """`audited`'s counts as the hourly DAG's `stats` task returns them (its XCom): one entry a
    difference and explanation, `engine · DIFFERENCE · EXPLANATION` (`-`: none)."""
    return {f"engine · {r['difference']} · {r['explanation'] or '-'}": r["n"] for r in audit["counts"]}


def target(row: dict, side: str) -> str:
    """What one side (`gold` or `engine`) of an engine_differences row correlated the message to."""
    if row[f"{side}_correlated_at"] is None:
        return "none"
    element = row[f"{side}_element_instance_key"]
    return (f"instance {row[f'{side}_process_instance_key']}" + (f" element {element}" if element else "")
            + f" at {row[f'{side}_correlated_at'].strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}")
