"""`correlake` as a client of a Spark Connect server (`connect_server.py`), for
`connect_compare.py`: the CLI's own `main`, in this process, with the calls that reach
the JVM through py4j replaced. Not run by CI; not a product command.

    CORRELAKE_CONNECT_URL=sc://localhost:PORT SPARK_CONNECT_AUTHENTICATE_TOKEN=… CORRELAKE_KEEP_DRIVER=0 \
        .venv/bin/python scripts/connect_cli.py run --landing … --lake …

(`localhost`, not 127.0.0.1: PySpark's client sends a token over a plain local channel only
to a host of that name; to any other it opens TLS.) `--unguarded-sql` as the first
argument runs `correlake sql`'s statement as `spark.sql` reads it, without the read-only
check, which walks Catalyst's plan in the JVM and has no Connect counterpart: a
measurement of the query's cost, not of the command.

What is replaced (`REPLACED`), and why it is not the product's behaviour:
- the session: `SparkSession.builder.remote(...)`, made once; no log level, S3 settings,
  package shipping or SIGINT handler of the JVM (`runtime/session.py`), the server's own;
- after a run, no collection in the JVM (`runtime/memory.release`): a fresh process exits;
- bronze's shares: the partition-bytes target from `spark.conf`, the cores from this
  machine (the server is `local[*]` here) instead of the JVM's session state;
- a checkpoint without its plan's size estimate (`runtime/hints.without_estimate`): a
  plain `localCheckpoint` (a run of more than 10,000 key links could plan for minutes);
- the table cache of the analyst commands (`lake/table_cache.read`): each table a local
  checkpoint, whatever its size (Connect exposes no plan statistics);
- a defect of Connect: a frame's `__del__` that releases a checkpoint on the server
  (`CachedRemoteRelation`) makes a gRPC call from within Python's garbage collection,
  which can deadlock the process (seen after a run had published: the client waited
  forever in `threading.start`). It does nothing here; the session is released, and the
  server frees the checkpoints, when the command ends (`spark.stop`);
- a defect of Connect: the string columns of `mapInArrow` and `createDataFrame` come back
  as `string collate UTF8_BINARY`, which Delta writes into a table's schema and delta-rs
  refuses; such frames are cast back to `string` in SQL.
"""

from __future__ import annotations

import importlib
import os
import sys

_session = None
_frames: dict = {}  # (table path, commit) -> its local checkpoint


def connect_session(*_args, **_kwargs):
    """The Connect session of CORRELAKE_CONNECT_URL (the token from SPARK_CONNECT_AUTHENTICATE_TOKEN)."""
    global _session
    if _session is None:
        from pyspark.sql import SparkSession

        _session = SparkSession.builder.remote(os.environ["CORRELAKE_CONNECT_URL"]).create()
    return _session


def share_settings(spark):
    """bronze's split size and cores from `spark.conf` and this machine (no JVM to ask)."""
    return _bytes(spark.conf.get("spark.sql.files.maxPartitionBytes")), os.cpu_count() or 1


def _bytes(text: str) -> int:
    units = {"b": 1, "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30}
    text = text.strip().lower().removesuffix("b") or "0"
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def cached_read(spark, lake, path, prepare):
    """`table_cache.read` over Connect: the table at its latest commit, as a local checkpoint."""
    from correlake.lake.tables import latest_commit

    commit = latest_commit(path)
    if (path, commit) not in _frames:
        table = prepare(spark.read.format("delta").option("versionAsOf", commit[0]).load(path))
        _frames[(path, commit)] = table.localCheckpoint()
    return _frames[(path, commit)]


def plain_strings(df):
    """`df` with each column that holds strings cast, in SQL, to its type without a collation."""
    fields = df.schema.fields
    if not any("string" in f.dataType.simpleString() for f in fields):
        return df
    return df.selectExpr(*(f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`"
                           if "string" in f.dataType.simpleString() else f"`{f.name}`" for f in fields))


def _plain(method):
    def wrapped(self, *args, **kwargs):
        return plain_strings(method(self, *args, **kwargs))
    wrapped.__doc__ = method.__doc__
    return wrapped


REPLACED = (  # (module, attribute, replacement): each installed before the CLI imports its users
    ("correlake.runtime.session", "get_spark", connect_session),
    ("correlake.runtime.memory", "release", lambda spark: None),
    ("correlake.runtime.logs", "log_level", lambda context, level: None),
    ("correlake.transforms.bronze", "share_settings", share_settings),
    ("correlake.runtime.hints", "without_estimate", lambda df: df.localCheckpoint()),
    ("correlake.run.backends.spark_scope", "without_estimate", lambda df: df.localCheckpoint()),  # imported by name
    ("correlake.lake.table_cache", "read", cached_read),
)


def install(unguarded_sql: bool = False) -> list[str]:
    """Install REPLACED (and, `unguarded_sql`, `correlake sql` without its check); the names
    replaced. A name the code no longer has stops the harness: its figures would not be the code's."""
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import CachedRemoteRelation
    from pyspark.sql.connect.session import SparkSession

    CachedRemoteRelation.__del__ = lambda self: None
    DataFrame.mapInArrow = _plain(DataFrame.mapInArrow)
    SparkSession.createDataFrame = _plain(SparkSession.createDataFrame)
    replaced = []
    extra = [("correlake.analysis.read_only", "query", lambda spark, text, *a, **k: spark.sql(text))]
    for module, name, replacement in [*REPLACED, *(extra if unguarded_sql else [])]:
        target = importlib.import_module(module)
        if not hasattr(target, name):
            raise SystemExit(f"connect_cli: {module}.{name} is gone: update REPLACED to the code as it is")
        setattr(target, name, replacement)
        replaced.append(f"{module}.{name}")
    return replaced


def main(argv: list[str]) -> int:
    unguarded = argv[:1] == ["--unguarded-sql"]
    install(unguarded)
    from correlake.interfaces.cli import main as cli_main

    try:
        return cli_main(argv[1:] if unguarded else argv)
    finally:
        if _session is not None:
            _session.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
