"""The views `explanations` and `near_misses` and `correlake explain` (contract revision 3,
Explanations) on one landing run once through the real pipeline: one tenant per case,
every reason of a message and of a subscription, and each kind of near miss."""

from __future__ import annotations

import json

import pytest
from support.helpers import write_landing
from support.records import S, deploy, left, msg, sub

from correlake.interfaces import cli
from correlake.lake import catalog
from correlake.run import pipeline

AS_OF = 1000 * S
GATEWAY = "EVENT_BASED_GATEWAY"
MESSAGES = [
    msg(1, 10, mid="a", tenant="dup"), msg(2, 20, mid="a", tenant="dup"),  # 2 is rejected: 1 is buffered
    msg(3, 10, "s", tenant="lock"), msg(4, 20, "s", tenant="lock"),  # 3 starts p and holds the lock for good
    msg(14, 30, tenant="lock"),  # on the locked key, but of a name that starts no process
    msg(5, 10, ttl=100 * S, tenant="earlier"), msg(6, 20, ttl=100 * S, tenant="earlier"),
    msg(7, 900, ttl=3600 * S, tenant="waiting"),
    msg(8, 10, ttl=10 * S, tenant="late"),  # its deadline (20 s) comes 30 s before e1 opens
    msg(9, 50, tenant="closed"),  # 30 s after e1 closed
    msg(11, 20, "a", tenant="sibling"),
    msg(12, 20, tenant="process"),
    msg(13, 10, "n", "q", tenant="near"),
]
EVENTS = [
    deploy(1, 0, "p", starts=("s",), tenant="lock"),
    sub(2, 30, "e1", tenant="earlier"),  # takes 5, the earlier of the two buffered
    sub(3, 50, "e1", tenant="late"),
    sub(4, 10, "e1", tenant="closed"), left(5, 20, "e1", tenant="closed"),
    sub(6, 10, "e1", "a", etype=GATEWAY, tenant="sibling"), sub(7, 10, "e1", "b", "k2", etype=GATEWAY, tenant="sibling"),
    sub(8, 10, "e1", pik="i1", tenant="process"), sub(9, 11, "e2", pik="i2", tenant="process"),
    sub(10, 10, "e1", tenant="open"),
    sub(11, 10, "e1", tenant="none"), left(12, 20, "e1", tenant="none"),
    # near misses of message 13 (n, q): by 5 s, 10 s and 20 s
    sub(13, 15, "e1", "n", " Q ", tenant="near"), sub(14, 20, "e3", "n", "q", tenant="near2"),
    sub(15, 30, "e2", " N", "q", tenant="near"), left(16, 40, "e2", tenant="near"),
]
# (kind, tenant, message key or (element instance, name)) -> (reason, related message, related subscription, gap_ms)
EXPECTED = {
    ("MESSAGE", "dup", 2): ("DUPLICATE", 1, None, None),
    ("MESSAGE", "dup", 1): ("NO_SUBSCRIPTION", None, None, None),
    ("MESSAGE", "lock", 4): ("START_LOCKED", 3, None, None),
    ("MESSAGE", "lock", 14): ("NO_SUBSCRIPTION", None, None, None),
    ("MESSAGE", "earlier", 6): ("TAKEN_BY_EARLIER", 5, "e1", None),
    ("MESSAGE", "waiting", 7): ("WAITING", None, None, None),
    ("MESSAGE", "late", 8): ("SUBSCRIPTION_AFTER_DEADLINE", None, "e1", 30 * S),
    ("MESSAGE", "closed", 9): ("SUBSCRIPTION_CLOSED_BEFORE", None, "e1", 30 * S),
    ("MESSAGE", "near", 13): ("NO_SUBSCRIPTION", None, None, None),
    ("SUBSCRIPTION", "sibling", ("e1", "b")): ("SIBLING_CORRELATED", None, None, None),
    ("SUBSCRIPTION", "process", ("e2", "m")): ("TAKEN_BY_PROCESS", 12, None, None),
    ("SUBSCRIPTION", "late", ("e1", "m")): ("MESSAGE_EXPIRED_BEFORE_OPEN", 8, None, 30 * S),
    ("SUBSCRIPTION", "open", ("e1", "m")): ("WAITING", None, None, None),
    ("SUBSCRIPTION", "closed", ("e1", "m")): ("MESSAGE_AFTER_CLOSE", 9, None, 30 * S),
    ("SUBSCRIPTION", "none", ("e1", "m")): ("NO_MESSAGE", None, None, None),
    ("SUBSCRIPTION", "near", ("e1", "n")): ("WAITING", None, None, None),
    ("SUBSCRIPTION", "near", ("e2", " N")): ("NO_MESSAGE", None, None, None),
    ("SUBSCRIPTION", "near2", ("e3", "n")): ("WAITING", None, None, None),
}


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("explain")
    landing = write_landing(root / "landing", MESSAGES, EVENTS)
    lake = str(root / "lake")
    pipeline.run(spark, str(landing), lake, as_of=AS_OF)
    catalog.register(spark, lake)
    return lake


def _key(r: dict) -> tuple:
    if r["kind"] == "MESSAGE":
        return ("MESSAGE", r["tenant_id"], r["message_key"])
    return ("SUBSCRIPTION", r["tenant_id"], (r["element_instance_key"], r["message_name"]))


def test_each_unmatched_object_has_its_first_reason(spark, lake):
    got = {_key(r): (r["reason"], r["related_message_key"], r["related_element_instance_key"], r["gap_ms"])
           for r in (r.asDict() for r in spark.sql("SELECT * FROM explanations").collect())}
    assert got == EXPECTED
    types = dict(spark.sql("SELECT * FROM explanations").dtypes)
    assert types["gap_ms"] == types["related_message_key"] == types["message_key"] == "bigint"


def test_near_misses_of_each_kind_closest_first(spark, lake):
    rows = [r.asDict() for r in spark.sql("SELECT * FROM near_misses WHERE kind = 'MESSAGE' AND message_key = 13")
            .collect()]
    assert [(r["miss"], r["other_kind"], r["other_tenant_id"], r["other_element_instance_key"], r["other_name"],
             r["other_correlation_key"]) for r in rows] == [
        ("KEY_CASE_OR_SPACE", "SUBSCRIPTION", "near", "e1", "n", " Q "),
        ("OTHER_TENANT", "SUBSCRIPTION", "near2", "e3", "n", "q"),
        ("NAME_CASE_OR_SPACE", "SUBSCRIPTION", "near", "e2", " N", "q")]
    assert all(r["tenant_id"] == "near" and r["element_instance_key"] is None and r["message_name"] is None
               and r["other_message_key"] is None for r in rows)
    back = spark.sql("SELECT * FROM near_misses WHERE kind = 'SUBSCRIPTION' AND tenant_id = 'near2'").collect()
    assert [(r["miss"], r["other_kind"], r["other_message_key"]) for r in back] == [("OTHER_TENANT", "MESSAGE", 13)]
    most = spark.sql("SELECT kind, tenant_id, message_key, element_instance_key, message_name, count(*) AS n "
                     "FROM near_misses GROUP BY ALL ORDER BY n DESC").first()
    assert most["n"] <= 10


def test_the_counts_the_hourly_dag_publishes_are_the_views(spark, lake):
    """`report_data.reason_counts` (the stats task's return value): per kind and reason, and
    per near-miss kind the objects that have one."""
    from collections import Counter

    from correlake.analysis.report_data import reason_counts

    counts = reason_counts(spark, lake)
    by_reason = Counter(f"{kind} · {reason}" for (kind, _, _), (reason, *_) in EXPECTED.items())
    assert {k: v for k, v in counts.items() if not k.startswith("near miss")} == dict(by_reason)
    misses = spark.sql("SELECT DISTINCT miss, kind, tenant_id, message_key, element_instance_key, message_name "
                       "FROM near_misses").collect()
    assert {k: v for k, v in counts.items() if k.startswith("near miss")} == {
        f"near miss · {m}": n for m, n in Counter(r["miss"] for r in misses).items()}


def test_explain_tells_a_story_with_its_reason(lake, capsys):
    assert cli.main(["explain", "--lake", lake, "--message-key", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "message 4 (tenant lock, name 's', correlation key 'k')"
    assert "published, ttl 60000 ms; buffered until 1970-01-01 00:01:20.000" in out[2]
    assert "instance msg-start:p:3 of p started by message 3 (holds the lock)" in out[1]
    assert out[-2:] == ["  as of 1970-01-01 00:16:40.000: EXPIRED", "  reason: START_LOCKED (message 3)"]
    assert cli.main(["explain", "--lake", lake, "--message-key", "14"]) == 0  # p's lock is not its business
    assert "holds the lock" not in capsys.readouterr().out
    assert cli.main(["explain", "--lake", lake, "--element-instance-key", "e1", "--tenant", "closed"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("  ", 2)[-1] for line in out[1:4]] == [
        "subscription e1 (INTERMEDIATE_CATCH_EVENT of p v1, instance i) opened",
        "subscription e1 (INTERMEDIATE_CATCH_EVENT of p v1, instance i) closed (ELEMENT_LEFT)",
        "message 9 published, ttl 60000 ms; buffered until 1970-01-01 00:01:50.000"]
    reason = out.index("  reason: MESSAGE_AFTER_CLOSE (message 9, gap 30000 ms)")
    assert out[reason - 1] == "  as of 1970-01-01 00:16:40.000: closed (ELEMENT_LEFT)"
    assert out[reason + 1:] and all(line.startswith("  near miss (OTHER_TENANT): message ") for line in out[reason + 1:])
    # a sibling of another key closed it: the story says which, and what it took
    assert cli.main(["explain", "--lake", lake, "--element-instance-key", "e1", "--message-name", "b"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("  ", 2)[-1] for line in out[1:4]] == [
        "subscription e1 (EVENT_BASED_GATEWAY of p v1, instance i) opened",
        "its sibling subscription to 'a' took message 11 (rule 13)",
        "subscription e1 (EVENT_BASED_GATEWAY of p v1, instance i) closed (SIBLING_CORRELATED)"]


def test_explain_json_has_the_views_columns_and_near_misses(lake, capsys):
    assert cli.main(["explain", "--lake", lake, "--name", "n", "--correlation-key", "q", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["tenant_id"], r["message_key"], r["element_instance_key"], r["reason"]) for r in got] == [
        ("MESSAGE", "near", 13, None, "NO_SUBSCRIPTION"), ("SUBSCRIPTION", "near2", None, "e3", "WAITING")]
    assert set(got[0]) == {"kind", "tenant_id", "message_key", "element_instance_key", "message_name", "reason",
                           "related_message_key", "related_element_instance_key", "gap_ms", "near_misses"}
    assert [m["miss"] for m in got[0]["near_misses"]] == ["KEY_CASE_OR_SPACE", "OTHER_TENANT", "NAME_CASE_OR_SPACE"]
    assert cli.main(["explain", "--lake", lake, "--message-key", "5", "--json"]) == 0  # it correlated
    assert json.loads(capsys.readouterr().out)[0]["reason"] is None


@pytest.mark.parametrize("argv", [["--message-key", "999"], ["--element-instance-key", "nope"],
                                  ["--name", "n"], ["--message-key", "4", "--element-instance-key", "e1"], []])
def test_explain_exits_2_with_one_line(lake, capsys, argv):
    assert cli.main(["explain", "--lake", lake, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("correlake: ")
