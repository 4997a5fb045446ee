"""`correlake sql` is read-only by construction: an allow-list of parsed plans, checked
before Spark analyses anything, and of functions and their options, checked against Spark's
registry. Each attack is refused with its reason (exit 2) and the lake's files stay as they
were; nothing outside the lake is opened; the queries analysts write still run."""

from __future__ import annotations

import hashlib
import http.server
import re
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from correlake.analysis import allowed, read_only
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
        "SELECT xpath_string(name, 'a') FROM gold_messages": "xpath_string() fetches the external DTD",
        "SELECT from_json(name, 'a INT', map('noSuchOption', 'x')) FROM gold_messages":
            "from_json()'s option noSuchOption is not one correlake sql allows",
        "SELECT from_json(name, 'a INT', str_to_map('mode:FAILFAST')) FROM gold_messages":
            "from_json()'s options are given as map('key', 'value', …) with literal keys",
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
        "SELECT from_csv('1;2', 'a INT, b INT', map('SEP', ';')).b * 100 + from_json('{\"a\": 3}', 'a INT', "
        "map('mode', 'FAILFAST')).a * 10 + from_xml('<r><a>4</a></r>', 'a INT', map('rowTag', 'r')).a AS n": "234",
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


@contextmanager
def http_server():
    """A server on 127.0.0.1, on a port of its own choosing: (its URL, the paths asked of it)."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'<!ENTITY x "fetched">')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_path_or_url_in_a_function_s_arguments_or_options_is_refused_unopened(lake, tmp_path, capsys):
    """The from_xml probe: an XML schema outside the lake gives the same refusal (exit 2)
    whether the file is there or not, or a URL, before Spark analyses anything; nor do the
    other functions that open a path or URL (xpath's external DTD, Avro's schema URL) reach
    the server that stands for anything outside the lake."""
    schema = tmp_path / "schema.xsd"
    schema.write_text('<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><xs:element name="a" type="xs:int"/>'
                      "</xs:schema>")
    before = digest(lake)
    with http_server() as (url, asked):
        probe = "SELECT from_xml('<a>1</a>', 'a INT', map('rowValidationXSDPath', '{}'))"
        answers = {sql(capsys, lake, probe.format(where)) for where in (schema, tmp_path / "missing.xsd", f"{url}/x")}
        assert answers == {(2, "", "correlake: refused: from_xml()'s option rowValidationXSDPath opens a path or URL "
                            f"(an XML schema); correlake sql only reads ({read_only.STATEMENTS})\n")}
        refused = {
            f"SELECT schema_of_xml('<a>1</a>', map('ROWVALIDATIONXSDPATH', '{url}/x'))":
                "schema_of_xml()'s option rowValidationXSDPath opens a path or URL",
            f"SELECT from_xml('<a>1</a>', 'a INT', map('rowTag', 'a', 'rowValidationXSDPath', '{url}/x'))":
                "from_xml()'s option rowValidationXSDPath opens",
            f"SELECT from_xml('<a>1</a>', 'a INT', map(concat('rowValidation', 'XSDPath'), '{url}/x'))":
                "from_xml()'s options are given as map('key', 'value', …) with literal keys",
            f"SELECT from_xml('<a>1</a>', 'a INT', options => map('rowValidationXSDPath', '{url}/x'))":
                "from_xml()'s options are given as map",
            f"SELECT xpath_string('<!DOCTYPE a SYSTEM \"{url}/x\"><a>&x;</a>', 'a')":
                "xpath_string() fetches the external DTD",
            f"SELECT from_avro(x'00', '\"int\"', map('avroSchemaUrl', '{url}/x'))":
                "from_avro()'s option avroSchemaUrl opens a path or URL",
        }
        for query, reason in refused.items():
            code, out, err = sql(capsys, lake, query)
            assert code == 2 and out == "" and err.startswith("correlake: refused: ") and reason in err, (query, err)
        assert asked == []
    assert digest(lake) == before


def _registry(spark) -> dict[str, tuple[str, str]]:
    """Spark's built-in functions (its registry): name -> (group, usage)."""
    registry = spark._jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.analysis.FunctionRegistry$")
    builtin = registry.getField("MODULE$").get(None).builtin()
    found, identifiers = {}, builtin.listFunction()
    for identifier in map(identifiers.apply, range(identifiers.size())):
        info = builtin.lookupFunction(identifier).get()
        found[identifier.funcName()] = (info.getGroup(), info.getUsage() or "")
    return found


def _declared_options(spark, parser: str) -> set[str]:
    """The options a parser declares (its DataSourceOptions)."""
    package = {"json": "catalyst.json.JSONOptions", "csv": "catalyst.csv.CSVOptions", "xml": "catalyst.xml.XmlOptions",
               "avro": "avro.AvroOptions"}[parser]
    options = spark._jvm.java.lang.Class.forName(f"org.apache.spark.sql.{package}$").getField("MODULE$").get(None)
    names = options.getAllOptions().iterator()
    found = set()
    while names.hasNext():
        found.add(names.next())
    return found


def test_the_allow_lists_decide_every_function_and_option_spark_has(spark):
    """Every function of Spark's registry (SHOW SYSTEM FUNCTIONS) is allowed or refused with a
    reason, and nothing else is named: a function a new Spark adds fails here until decided.
    The functions whose signature takes options, and where, are those whose options are
    checked, each against its parser's declared options, every one allowed or refused."""
    shown = {row.function for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    decided = allowed.FUNCTIONS | allowed.TABLE_FUNCTIONS | set(allowed.REFUSED_FUNCTIONS)
    assert (sorted(shown - decided), sorted(decided - shown)) == ([], [])
    assert not (allowed.FUNCTIONS | allowed.TABLE_FUNCTIONS) & set(allowed.REFUSED_FUNCTIONS)
    for name, reason in allowed.REFUSED_FUNCTIONS.items():
        for query in (f"SELECT `{name}`(1)", f"SELECT * FROM `{name}`(1)"):
            with pytest.raises(read_only.Refused, match=re.escape(f"{name}() {reason}")):
                read_only.query(spark, query, [])

    registry = _registry(spark)
    takes_options = {}
    for name, (group, usage) in registry.items():
        arguments = re.match(rf"\s*{re.escape(name)}\(([^)]*)\)", usage)
        names = [a.strip(" []") for a in arguments.group(1).split(",")] if arguments else []
        if "options" in names:
            takes_options[name] = (names.index("options"), group.removesuffix("_funcs"))
    checked = {name: at for name, at in takes_options.items() if name not in allowed.REFUSED_FUNCTIONS}
    assert checked == allowed.OPTION_FUNCTIONS
    for parser in {parser for _, parser in allowed.OPTION_FUNCTIONS.values()}:
        refused = set(allowed.REFUSED_OPTIONS.get(parser, {}))
        assert _declared_options(spark, parser) == allowed.OPTIONS[parser] | refused
        assert not allowed.OPTIONS[parser] & refused
