"""Query a correlake lake's gold tables with DuckDB, without Spark or Java.

    python examples/read_gold_duckdb.py LAKE ["SQL"] [--json]

delta-rs (the `deltalake` package) reads each gold table — deletion vectors applied,
which its `scan()` supports and its pyarrow-dataset readers do not — into Arrow;
DuckDB queries those Arrow tables under the names `gold_correlations`, `gold_messages`,
`gold_subscriptions`, `gold_message_started_instances` and `gold_as_of` (one row: the
instant gold_messages' statuses are at). Timestamps are UTC. A lake in object storage is read from its URI (s3a://BUCKET/PREFIX),
with delta-rs's settings from AWS's environment (AWS_ENDPOINT_URL, AWS_ALLOW_HTTP for a
server of one's own, AWS_REGION, the credentials).
Without SQL it prints messages by status and correlations per process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
from deltalake import DeltaTable

GOLD = ("correlations", "messages", "subscriptions", "message_started_instances", "as_of")
DEFAULT_SQL = """
SELECT 'messages' AS what, status AS kind, count(*) AS n FROM gold_messages GROUP BY ALL
UNION ALL
SELECT 'correlations', bpmn_process_id || ' ' || subscription_type, count(*) FROM gold_correlations GROUP BY ALL
ORDER BY what, kind
"""


def connect(lake: str | Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the lake's gold tables registered as Arrow tables."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name in GOLD:
        table = pa.table(DeltaTable(f"{str(lake).rstrip('/')}/gold/{name}").scan())  # applies deletion vectors
        con.register(f"gold_{name}", table)
    return con


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake", help="lake folder (holds gold/)")
    parser.add_argument("sql", nargs="?", default=DEFAULT_SQL, help="DuckDB SQL over the gold_* tables")
    parser.add_argument("--json", action="store_true", help="print one JSON object per row")
    args = parser.parse_args(argv)
    result = connect(args.lake).sql(args.sql)
    if args.json:
        for row in result.fetchall():
            print(json.dumps(dict(zip(result.columns, row)), default=str))
    else:
        result.show(max_rows=50)
    return 0


if __name__ == "__main__":
    sys.exit(main())
