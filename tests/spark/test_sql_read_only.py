"""`correlake sql` is read-only by construction: an allow-list of parsed plans, checked
before Spark analyses anything. Each attack is refused with its reason (exit 2) and the
lake's files stay as they were; the queries analysts write still run."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from correlake.analysis import read_only
from correlake.interfaces import cli
from correlake.lake import catalog


@pytest.fixture(scope="module")
def lake(demo_lake, tmp_path_factory) -> str:
    """A private copy of the demo lake: an attack that got through would change only it."""
    copy = tmp_path_factory.mktemp("read_only") / "lake"
    shutil.copytree(demo_lake, copy)
    return str(copy)


def digest(folder: str) -> str:
    """Every file's path and content under `folder`."""
    sha = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        sha.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            sha.update(path.read_bytes())
    return sha.hexdigest()


def sql(capsys, lake: str, query: str) -> tuple[int, str, str]:
    code = cli.main(["sql", "--lake", lake, "--limit", "100", query])
    out = capsys.readouterr()
    return code, out.out, out.err


def attacks(lake: str, outside: str) -> dict[str, str]:
    """Statement -> the reason it is refused for."""
    return {
        f"INSERT OVERWRITE DIRECTORY '{lake}/gold/messages' USING parquet SELECT 1":
            "INSERT OVERWRITE DIRECTORY is not a query",
        "INSERT INTO gold_messages SELECT * FROM gold_messages": "INSERT is not a query",
        "DELETE FROM gold_messages": "DELETE is not a query",
        "UPDATE gold_messages SET ttl_ms = 0": "UPDATE is not a query",
        "MERGE INTO gold_messages t USING gold_messages s ON t.message_key = s.message_key "
        "WHEN MATCHED THEN DELETE": "MERGE is not a query",
        "DROP TABLE gold_messages": "DROP TABLE is not a query",
        "CREATE TABLE copied AS SELECT * FROM gold_messages": "CREATE TABLE AS SELECT is not a query",
        "CACHE TABLE gold_messages": "CACHE TABLE is not a query",
        "SET spark.sql.ansi.enabled=false": "SET is not a query",
        "RESET": "RESET is not a query",
        f"ADD JAR {outside}/x.jar": "ADD JAR is not a query",
        "EXECUTE IMMEDIATE 'DELETE FROM gold_messages'": "EXECUTE IMMEDIATE is not a query",
        # refused when parsed, so never called (System.exit(String) does not exist either)
        "SELECT reflect('java.lang.System', 'exit', '0')": "reflect() calls a Java method",
        "SELECT java_method('java.lang.System', 'getProperty', 'user.home')": "java_method() calls a Java method",
        "SELECT try_reflect('java.lang.System', 'getenv', 'HOME')": "try_reflect() calls a Java method",
        "SELECT m.name FROM gold_messages m WHERE m.name = (SELECT java_method('java.lang.System', 'lineSeparator'))":
            "java_method() calls a Java method",
        "SELECT sum(ttl_ms) OVER w FROM gold_messages WINDOW w AS (PARTITION BY reflect('java.util.UUID', "
        "'randomUUID'))": "reflect() calls a Java method",
        "SELECT system.builtin.reflect('java.util.UUID', 'randomUUID')": "a function is called by its bare name",
        "SELECT IDENTIFIER('reflect')('java.util.UUID', 'randomUUID')": "ExpressionWithUnresolvedIdentifier",
        "SELECT some_udf(name) FROM gold_messages": "some_udf() is not one of Spark's built-in functions",
        "SELECT * FROM text.`/etc/passwd`": "text./etc/passwd is not a table or view of the lake",
        f"SELECT * FROM delta.`{outside}`": f"delta.{outside} is not a table or view of the lake",
        f"SELECT * FROM delta.`{lake}/gold/messages`": "is not a table or view of the lake",
        "SELECT * FROM parquet.`/etc`": "parquet./etc is not a table or view of the lake",
        "SELECT * FROM IDENTIFIER(concat('text.`/etc/', 'passwd`'))": "PlanWithUnresolvedIdentifier is not a query",
        "SELECT * FROM gold_messages WITH ('path' = '/etc')": "a relation's options",
        "SELECT * FROM read_files('/etc/passwd')": "table function read_files()",
        "SELECT * FROM python_worker_logs()": "table function python_worker_logs()",
        "VACUUM gold_messages RETAIN 0 HOURS": "VACUUM is not a query",
        "OPTIMIZE gold_messages": "OPTIMIZE is not a query",
        "RESTORE gold_messages TO VERSION AS OF 0": "RESTORE is not a query",
        "REFRESH TABLE gold_messages": "REFRESH TABLE is not a query",
        "CREATE TEMP VIEW gold_messages AS SELECT 1 AS x": "CREATE VIEW is not a query",
        "USE other": "USE is not a query",
        "DECLARE v INT": "DECLARE is not a query",
        "BEGIN DELETE FROM gold_messages; END": "BEGIN … END is not a query",
        "WITH m AS (SELECT * FROM gold_messages) INSERT INTO gold_messages SELECT * FROM m":
            "INSERT is not a query",
        "EXPLAIN DELETE FROM gold_messages": "DELETE is not a query",
        "SELECT (WITH a AS (SELECT 1) SELECT 1), * FROM a": "a is not a table or view of the lake",  # out of scope
        "SHOW TABLES IN other": "UnresolvedNamespace is not a query",
        "DESCRIBE other.gold_messages": "other.gold_messages is not a table or view of the lake",
        "SELECT * FROM gold_mesages": "gold_mesages is not a table or view of the lake (did you mean gold_messages?",
    }


def test_attacks_are_refused_before_analysis_and_the_lake_is_unchanged(lake, tmp_path, capsys):
    before = digest(lake)
    for query, reason in attacks(lake, str(tmp_path)).items():
        code, out, err = sql(capsys, lake, query)
        assert code == 2 and out == "", (query, out, err)
        assert err.startswith("correlake: refused: ") and reason in err and err.count("\n") == 1, (query, err)
        assert digest(lake) == before, query
    assert list(tmp_path.iterdir()) == []


def test_reads_of_tables_and_views_still_run(lake, capsys):
    allowed = {
        "SELECT count(*) AS n FROM gold_messages": "n",
        "WITH u AS (SELECT tenant_id, count(*) AS n FROM unmatched_messages GROUP BY tenant_id) "
        "SELECT * FROM u ORDER BY n DESC": "tenant_id",
        "SELECT c.message_key, m.status FROM gold_correlations c JOIN gold_messages m ON m.message_key = c.message_key "
        "WHERE EXISTS (SELECT 1 FROM gold_subscriptions s WHERE s.tenant_id = c.tenant_id) LIMIT 3": "status",
        "SELECT status, count(*) AS n, percentile_approx(ttl_ms, 0.5) AS p50 FROM gold_messages GROUP BY ALL": "p50",
        "SELECT message_key, row_number() OVER (PARTITION BY tenant_id ORDER BY published_at) AS nth "
        "FROM gold_messages QUALIFY nth <= 2": "nth",
        "SELECT * FROM latency_percentiles": "since_opened_p50_s",
        "SELECT * FROM range(3) AS r(x) LATERAL VIEW explode(array(x, x)) e AS y": "y",
        "VALUES (1, 'a'), (2, 'b')": "col2",
        "SHOW TABLES": "gold_correlations",
        "SHOW VIEWS": "unmatched_messages",
        "SHOW COLUMNS IN gold_messages": "message_key",
        "DESCRIBE gold_messages": "message_key",
        "EXPLAIN SELECT status, count(*) FROM gold_messages GROUP BY status": "Physical Plan",
        "FROM gold_messages |> WHERE ttl_ms > 0 |> AGGREGATE count(*) AS n GROUP BY status": "n",
        "SELECT * EXCEPT (ttl_ms) FROM gold_messages LIMIT 1": "message_key",
        "SELECT status, count(*) AS n FROM gold_messages GROUP BY status HAVING count(*) > 0": "status",
    }
    before = digest(lake)
    for query, column in allowed.items():
        code, out, err = sql(capsys, lake, query)
        assert code == 0 and column in out, (query, err)
    assert digest(lake) == before


def test_every_view_passes_as_a_statement_of_its_own(spark, lake):
    """What the product itself creates (sql/views/) is a query the guard allows."""
    registered = catalog.register(spark, lake)  # the views over tables this lake has
    names = [*catalog.TABLE_NAMES, *catalog.views()]
    for view in catalog.views().values():
        if view.name in registered:
            assert read_only.query(spark, view.sql, names).columns, view.name
