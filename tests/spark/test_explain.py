"""The views `explanations` and `near_misses` and `correlake explain` (contract revision 3,
Explanations) on one landing run once through the real pipeline: one tenant per case,
every reason of a message and of a subscription, reasons that overlap, related objects
chosen among several, each kind of near miss and their cap; each worked by hand, and the
explanations model (tests/support/explanations_model.py) agreeing with them and the views."""

from __future__ import annotations

import json

import pytest
from support import explanations_model
from support.helpers import write_landing
from support.records import S, deploy, left, msg, sub
from support.reference_model import reference

from correlake.interfaces import cli
from correlake.lake import catalog
from correlake.run import pipeline

AS_OF = 1000 * S
CAP_OTHER_TENANTS = (2, -4, 5, -6, 7, 8, -9, 10, 11, -12)  # opened that many seconds from message 54
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
    # reasons that overlap, and related objects chosen among several (worked below by hand)
    msg(21, 10, "s", "w", 3600 * S, tenant="lockwait"), msg(22, 20, "s", "w", 3600 * S, tenant="lockwait"),
    msg(33, 10, ttl=3600 * S, tenant="earlier2"), msg(31, 12, ttl=3600 * S, tenant="earlier2"),
    msg(32, 20, ttl=3600 * S, tenant="earlier2"),
    msg(41, 10, ttl=10 * S, tenant="afterdl"),
    msg(42, 10, tenant="closedlast"),
    msg(44, 5, ttl=100 * S, tenant="process2"), msg(43, 6, ttl=100 * S, tenant="process2"),
    msg(45, 50, tenant="process2"),
    msg(46, 11, ttl=5 * S, tenant="expired2"), msg(47, 12, ttl=2 * S, tenant="expired2"),
    msg(48, 10, ttl=8 * S, tenant="expired2"),
    msg(49, 10, tenant="after2"), msg(50, 5, tenant="after2"),
    msg(51, 10, "s", tenant="lock2"), msg(53, 17, "s", tenant="lock2"), msg(52, 20, "s", tenant="lock2"),
    msg(54, 100, "c", "q", tenant="cap"),  # 12 near misses, 1 s to 12 s away: the 10 closest are listed
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
    deploy(21, 0, "p", starts=("s",), tenant="lockwait"),  # 21 starts p and holds the lock for good
    sub(22, 30, "e1", "s", "w", process="q", tenant="lockwait"),  # q's subscription takes 21, the earlier
    sub(23, 30, "z9", pik="i1", tenant="earlier2"), sub(24, 40, "a1", pik="i2", tenant="earlier2"),  # take 33, 31
    sub(25, 5, "c1", tenant="afterdl"), left(26, 8, "c1", tenant="afterdl"),
    sub(27, 40, "z2", tenant="afterdl"), sub(28, 60, "m3", tenant="afterdl"), sub(29, 50, "a1", tenant="afterdl"),
    sub(30, 1, "z1", tenant="closedlast"), sub(31, 2, "a1", tenant="closedlast"), sub(32, 2, "m1", tenant="closedlast"),
    left(33, 3, "z1", tenant="closedlast"), left(34, 6, "a1", tenant="closedlast"), left(35, 4, "m1", tenant="closedlast"),
    sub(36, 10, "e1", pik="i1", tenant="process2"), sub(37, 10, "e3", pik="i3", tenant="process2"),  # take 44, 43
    sub(38, 30, "e2", pik="i2", tenant="process2"), left(39, 40, "e2", tenant="process2"),
    sub(40, 30, "e1", tenant="expired2"),
    sub(41, 1, "e1", tenant="after2"), left(42, 2, "e1", tenant="after2"),
    deploy(43, 0, "z", starts=("s",), tenant="lock2"), deploy(44, 15, "a", starts=("s",), tenant="lock2"),
    sub(45, 900, "e1", tenant="asof"), left(46, 1100, "e1", tenant="asof"),  # left after as_of
    sub(47, 101, "e1", "c", "Q", tenant="cap"), sub(48, 103, "e2", "C", "q", tenant="cap"),
    *(sub(50 + n, 100 + t, "e1", "c", "q", tenant=f"cap{n}") for n, t in enumerate(CAP_OTHER_TENANTS)),
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
    # 22: locked by 21 (2), also taken by earlier (3: q opened while it was buffered, took 21) and buffered (4)
    ("MESSAGE", "lockwait", 22): ("START_LOCKED", 21, None, None),
    # 32: z9 (30 s, took 33) and a1 (40 s, took 31) opened while it was buffered: the first; also buffered (4)
    ("MESSAGE", "earlier2", 32): ("TAKEN_BY_EARLIER", 33, "z9", None),
    # 41 (deadline 20 s): z2, a1, m3 opened at 40, 50, 60 s (5: the first), c1 closed at 8 s before it (6)
    ("MESSAGE", "afterdl", 41): ("SUBSCRIPTION_AFTER_DEADLINE", None, "z2", 20 * S),
    ("SUBSCRIPTION", "afterdl", ("c1", "m")): ("MESSAGE_AFTER_CLOSE", 41, None, 2 * S),
    ("SUBSCRIPTION", "afterdl", ("z2", "m")): ("MESSAGE_EXPIRED_BEFORE_OPEN", 41, None, 20 * S),
    ("SUBSCRIPTION", "afterdl", ("a1", "m")): ("MESSAGE_EXPIRED_BEFORE_OPEN", 41, None, 30 * S),
    ("SUBSCRIPTION", "afterdl", ("m3", "m")): ("MESSAGE_EXPIRED_BEFORE_OPEN", 41, None, 40 * S),
    # 42: z1, m1, a1 closed at 3, 4, 6 s before its publish: the last
    ("MESSAGE", "closedlast", 42): ("SUBSCRIPTION_CLOSED_BEFORE", None, "a1", 4 * S),
    ("SUBSCRIPTION", "closedlast", ("z1", "m")): ("MESSAGE_AFTER_CLOSE", 42, None, 7 * S),
    ("SUBSCRIPTION", "closedlast", ("a1", "m")): ("MESSAGE_AFTER_CLOSE", 42, None, 4 * S),
    ("SUBSCRIPTION", "closedlast", ("m1", "m")): ("MESSAGE_AFTER_CLOSE", 42, None, 6 * S),
    # e2 opened while 44 (5 s) and 43 (6 s) were buffered, both p's already: the first (2), before 45 after close (5)
    ("SUBSCRIPTION", "process2", ("e2", "m")): ("TAKEN_BY_PROCESS", 44, None, None),
    ("MESSAGE", "process2", 45): ("SUBSCRIPTION_CLOSED_BEFORE", None, "e2", 10 * S),  # e1, e3 closed at 10 s
    # deadlines 16, 14, 18 s before e1 opened at 30 s: the latest (3), before e1 still open (4)
    ("SUBSCRIPTION", "expired2", ("e1", "m")): ("MESSAGE_EXPIRED_BEFORE_OPEN", 48, None, 12 * S),
    ("MESSAGE", "expired2", 46): ("SUBSCRIPTION_AFTER_DEADLINE", None, "e1", 14 * S),
    ("MESSAGE", "expired2", 47): ("SUBSCRIPTION_AFTER_DEADLINE", None, "e1", 16 * S),
    ("MESSAGE", "expired2", 48): ("SUBSCRIPTION_AFTER_DEADLINE", None, "e1", 12 * S),
    # 50 (5 s) and 49 (10 s) published after e1 closed at 2 s: the first
    ("SUBSCRIPTION", "after2", ("e1", "m")): ("MESSAGE_AFTER_CLOSE", 50, None, 3 * S),
    ("MESSAGE", "after2", 49): ("SUBSCRIPTION_CLOSED_BEFORE", None, "e1", 8 * S),
    ("MESSAGE", "after2", 50): ("SUBSCRIPTION_CLOSED_BEFORE", None, "e1", 3 * S),
    # 52: z locked by 51, a (deployed at 15 s) by 53: the first process's holder
    ("MESSAGE", "lock2", 52): ("START_LOCKED", 53, None, None),
    ("SUBSCRIPTION", "asof", ("e1", "m")): ("WAITING", None, None, None),  # left after as_of: open at as_of
    ("MESSAGE", "cap", 54): ("NO_SUBSCRIPTION", None, None, None),
    ("SUBSCRIPTION", "cap", ("e1", "c")): ("WAITING", None, None, None),
    ("SUBSCRIPTION", "cap", ("e2", "C")): ("WAITING", None, None, None),
    **{("SUBSCRIPTION", f"cap{n}", ("e1", "c")): ("WAITING", None, None, None) for n in range(10)},
}
# message 54's near misses, closest first: 1 s (key), 2 s (tenant), 3 s (name), 4 s to 10 s (tenants)
CAP_NEAR_MISSES = [("KEY_CASE_OR_SPACE", "cap", "c", "Q"), ("OTHER_TENANT", "cap0", "c", "q"),
                   ("NAME_CASE_OR_SPACE", "cap", "C", "q"),
                   *(("OTHER_TENANT", f"cap{n}", "c", "q") for n in range(1, 8))]


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
    cap = spark.sql("SELECT * FROM near_misses WHERE kind = 'MESSAGE' AND message_key = 54").collect()
    assert [(r["miss"], r["other_tenant_id"], r["other_name"], r["other_correlation_key"]) for r in cap] == \
        CAP_NEAR_MISSES


def test_the_views_are_the_model_computed_from_the_records(spark, lake):
    """The explanations model gives the hand-worked reasons, and both views equal it on every
    column (near misses in order)."""
    gold = reference(MESSAGES, EVENTS, as_of=AS_OF)
    assert {_key(r): (r["reason"], r["related_message_key"], r["related_element_instance_key"], r["gap_ms"])
            for r in explanations_model.explanations(gold, EVENTS)} == EXPECTED
    assert explanations_model.problems(spark, lake, gold, EVENTS) == []


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
    assert cli.main(["explain", "--lake", lake, "--element-instance-key", "e1", "--tenant", "asof"]) == 0
    out = capsys.readouterr().out.splitlines()  # left after as_of: open then
    assert out[out.index("  reason: WAITING") - 1] == "  as of 1970-01-01 00:16:40.000: open"
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
