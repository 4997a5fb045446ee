"""`correlake sql` on a real demo lake: tables and views by name, the printed table and
its limit, CSV and Parquet output, and clear one-line errors (exit 2)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from correlake.analysis import explain
from correlake.config import table_path
from correlake.interfaces import cli
from correlake.lake.tables import version


def sql(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["sql", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_prints_an_aligned_table_and_tells_what_was_left_out(spark, demo_lake, capsys):
    total = spark.read.format("delta").load(table_path(demo_lake, "messages")).count()
    code, out, _ = sql(capsys, "--lake", demo_lake, "--limit", "3",
                       "SELECT message_key, status, published_at FROM gold_messages ORDER BY message_key")
    assert code == 0
    header, rule, *body, note = out.rstrip("\n").split("\n")
    assert header.split() == ["message_key", "status", "published_at"] and set(rule) == {"-", " "}
    width = len(rule.split()[0])
    assert len(body) == 3 and all(line[:width].strip().isdigit() and line[width - 1] != " " for line in body)
    assert body[0].split()[0].isdigit() and body[0].split()[2].startswith("20")
    assert note == f"(3 of {total} rows shown; {total - 3} not shown: raise --limit or use --out FILE)"

    code, out, _ = sql(capsys, "--lake", demo_lake, "SELECT outcome, count(*) AS n FROM start_lock_waits GROUP BY 1")
    assert code == 0 and out.startswith("outcome") and out.rstrip().endswith(("row)", "rows)"))

    code, out, _ = sql(capsys, "--lake", demo_lake, "--limit", "100", "SHOW TABLES")
    assert code == 0 and "gold_correlations" in out and "unmatched_messages" in out and "outbox" in out

    code, out, _ = sql(capsys, "--lake", demo_lake, "SELECT sum(CASE kind WHEN 'CORRELATED' THEN 1 ELSE -1 END) "
                       "- (SELECT count(*) FROM gold_correlations) AS d FROM outbox")  # its live events: gold's
    assert code == 0 and out.split("\n")[2].strip() == "0", out

    code, out, _ = sql(capsys, "--lake", demo_lake, "--list")
    assert code == 0 and "gold_message_started_instances" in out and "quarantine" in out
    assert "buffered_backlog" in out and "?" in out


def test_writes_csv_and_parquet(demo_lake, tmp_path, capsys):
    query = "SELECT message_key, name, expired_at, listening_processes FROM unmatched_messages ORDER BY message_key"
    code, out, _ = sql(capsys, "--lake", demo_lake, "--out", str(tmp_path / "u.csv"), query)
    assert code == 0 and out.startswith("wrote ")
    with open(tmp_path / "u.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and out.split()[1] == str(len(rows))
    assert json.loads(rows[0]["listening_processes"]) == ["order"]  # nested values become JSON text

    code, _, _ = sql(capsys, "--lake", demo_lake, "--out", str(tmp_path / "u.data"), "--format", "parquet", query)
    table = pq.read_table(tmp_path / "u.data")
    assert code == 0 and table.num_rows == len(rows)
    assert [str(k) for k in table.column("message_key").to_pylist()] == [r["message_key"] for r in rows]


def test_errors_are_one_clear_line_and_exit_2(demo_lake, tmp_path, capsys):
    cases = {
        "SELEC * FROM gold_messages": "PARSE_SYNTAX_ERROR",
        "SELECT * FROM unmatched_message":
            "refused: unmatched_message is not a table or view of the lake (did you mean unmatched_messages? "
            "`correlake sql --list` names them)",
        "SELECT no_such_column FROM gold_messages": "UNRESOLVED_COLUMN",
        "DELETE FROM gold_messages": "refused: DELETE is not a query; correlake sql only reads",
        "WITH m AS (SELECT * FROM gold_messages) INSERT INTO gold_messages SELECT * FROM m":
            "refused: INSERT is not a query",
    }
    before = version(table_path(demo_lake, "messages"))
    for query, expected in cases.items():
        code, out, err = sql(capsys, "--lake", demo_lake, query)
        assert code == 2 and out == "", query
        assert err.startswith("correlake: ") and expected in err and err.count("\n") == 1, err
        assert ("--list" in err) == ("--list" in expected), err
    assert version(table_path(demo_lake, "messages")) == before

    code, _, err = sql(capsys, "--lake", str(tmp_path), "SELECT 1")
    assert code == 2 and "has no gold_correlations" in err
    code, _, err = sql(capsys, "--lake", str(tmp_path / "typo"), "SELECT 1")
    assert code == 2 and f"lake folder {tmp_path / 'typo'} does not exist" in err
    code, out, err = sql(capsys, "--lake", str(tmp_path / "typo"), "--list")  # not an empty list
    assert code == 2 and out == "" and f"lake folder {tmp_path / 'typo'} does not exist" in err
    (tmp_path / "a-file").write_text("")
    code, _, err = sql(capsys, "--lake", str(tmp_path / "a-file"), "SELECT 1")
    assert code == 2 and f"lake {tmp_path / 'a-file'} is a file, not a folder" in err
    code, _, err = sql(capsys, "--lake", demo_lake, "--out", str(tmp_path / "x.txt"), "SELECT 1")
    assert code == 2 and "--format" in err


def test_control_characters_of_values_and_names_are_printed_escaped(demo_lake, capsys):
    """A value (a producer's correlation key, say) or a column name cannot recolour the
    analyst's terminal or rewrite its lines: shown as `\\x1b`, `\\r`, `\\n`; other Unicode as is."""
    code, out, _ = sql(capsys, "--lake", demo_lake,
                       "SELECT concat('k-', chr(27), '[31mred', chr(13), 'over', chr(10), 'é') AS `key\x1b[0m`, "
                       "message_key FROM gold_messages ORDER BY message_key LIMIT 1")
    assert code == 0
    header, _, row, _ = out.rstrip("\n").split("\n")
    assert header.split()[0] == "key\\x1b[0m"
    assert row.startswith("k-\\x1b[31mred\\rover\\né ")
    assert not any(c in out for c in "\x1b\r")


def test_each_call_sees_only_its_own_lake(spark, demo_lake, tmp_path, capsys):
    """On one SparkSession, as on the kept driver: after a call on the demo's lake, which
    delivered, a lake that never delivered does not answer with its delivery state, and
    sql and explain leave the session with no view but their own lake's (report's figures
    register theirs by the same catalog.register)."""
    never = tmp_path / "lake"
    shutil.copytree(demo_lake, never, ignore=lambda folder, _: ["delivery"] if Path(folder) == Path(demo_lake) else [])
    delivered = spark.read.format("delta").load(table_path(demo_lake, "delivery_state")).count()

    def delivery_views() -> set[str]:
        names = {table.name for table in spark.catalog.listTables() if table.isTemporary}
        return {name for name in names if name.startswith("delivery_") or name == "dead_letters"}

    query = "SELECT count(*) AS n FROM delivery_state"
    code, out, _ = sql(capsys, "--lake", demo_lake, query)
    assert code == 0 and delivered > 0 and out.split("\n")[2].strip() == str(delivered), out
    code, out, err = sql(capsys, "--lake", str(never), query)
    assert (code, out) == (2, "") and "refused: this lake has no delivery_state (`correlake sql --list`" in err, err
    assert delivery_views() == set()
    code, out, _ = sql(capsys, "--lake", str(never), "--list")
    assert code == 0 and "gold_messages" in out and "delivery" not in out and "dead_letters" not in out, out

    key = spark.read.format("delta").load(table_path(never, "messages")).first().message_key
    assert sql(capsys, "--lake", demo_lake, "SELECT count(*) FROM delivery_events")[0] == 0
    assert delivery_views()
    explain.told(spark, str(never), {"message_key": key}, None, True, key)  # report registers as explain does
    assert delivery_views() == set()
