"""The outbox's events (`transforms/outbox.py`) on small hand-built frames: a key's first
correlation, a rerun that changes nothing, a changed, a removed and a returning
correlation, held-back ones, the payload's shape and the partition's Spark twin; and a
delivery delay end to end, through two runs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F
from support.delivery_helpers import Receiver
from support.helpers import versions, write_landing
from support.lake_rows import table_rows

from correlake.config import table_path
from correlake.contract.ordering import may_share_a_line, may_share_a_line_column, ordering_key, ordering_key_column
from correlake.contract.schemas import CORRELATION, OUTBOX
from correlake.delivery.events import partition_of
from correlake.interfaces import cli
from correlake.lake import journal
from correlake.run.backends import Spark
from correlake.run.outbox import new_events
from correlake.transforms.outbox import due_keys, outbox_events, partition

T0 = datetime(2026, 1, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc)
PARTITIONS = 8


def correlation(message_key: int, key: str = "k1", element: str = "e1", at: datetime = T0,
                variables: str | None = '{"b":[1,{"c":null}],"a":"é"}') -> tuple:
    return (message_key, "t", "m", key, "p", 1, "pi-1", element, "task", "CATCH", at,
            T0 - timedelta(seconds=1), variables)


class Tables:
    """Hand-built tables as a run's snapshot (`run/backends/base.Snapshot`)."""

    def __init__(self, spark, tables: dict):
        self.spark, self.history = spark, tables.get


def events(spark, correlations: list[tuple], history: list[dict], run_id: str = "r", due_until=None) -> list[dict]:
    gold = spark.createDataFrame(correlations, CORRELATION)
    past = spark.createDataFrame([tuple(e[f] for f in OUTBOX.fieldNames()) for e in history], OUTBOX)
    rows = outbox_events(gold, past, run_id, PARTITIONS, due_until).collect()
    return sorted((r.asDict() for r in rows), key=lambda e: (e["tenant_id"], e["ordering_key"], e["sequence"]))


@pytest.fixture(scope="module")
def first(spark):
    return events(spark, [correlation(1), correlation(2, key="k2", at=T0 + timedelta(seconds=1))], [])


def test_a_new_key_gets_one_correlated_event_per_correlation(first):
    assert [(e["kind"], e["correlation_key"], e["message_key"], e["sequence"]) for e in first] == [
        ("CORRELATED", "k1", 1, 1), ("CORRELATED", "k2", 2, 1)]
    assert len({e["event_id"] for e in first}) == 2 and {e["_run_id"] for e in first} == {"r"}
    assert [e["partition"] for e in first] == [partition_of("t", k, PARTITIONS) for k in ("k1", "k2")]


def test_the_payload_is_the_event_and_the_correlation_as_json(first):
    payload = json.loads(first[0]["payload"])
    head = ("event_id", "kind", "ordering_key", "sequence", "partition")
    assert list(payload) == [*head, *CORRELATION.fieldNames()]
    assert {k: payload[k] for k in head} == {k: first[0][k] for k in head}
    assert payload["ordering_key"] == "k1"
    assert payload["correlated_at"] == "2026-01-01T12:00:00.250Z"
    assert payload["message_published_at"] == "2026-01-01T11:59:59.250Z"
    assert payload["variables"] == {"b": [1, {"c": None}], "a": "é"}
    assert payload["message_key"] == 1 and payload["process_version"] == 1 and payload["element_id"] == "task"


def test_a_rerun_with_the_same_correlations_emits_nothing_and_ids_are_deterministic(spark, first):
    assert events(spark, [correlation(1), correlation(2, key="k2", at=T0 + timedelta(seconds=1))], first) == []
    again = events(spark, [correlation(1), correlation(2, key="k2", at=T0 + timedelta(seconds=1))], [], "r2")
    assert [e["event_id"] for e in again] == [e["event_id"] for e in first]


def test_a_changed_correlation_is_retracted_then_correlated_again(spark, first):
    k1 = [e for e in first if e["correlation_key"] == "k1"]
    second = events(spark, [correlation(1, element="e2")], k1)  # late data: another element instance
    assert [(e["kind"], e["sequence"]) for e in second] == [("RETRACTED", 2), ("CORRELATED", 3)]
    retracted, correlated = (json.loads(e["payload"]) for e in second)
    old = json.loads(k1[0]["payload"])
    assert {k: v for k, v in retracted.items() if k not in ("event_id", "kind", "sequence")} == {
        k: v for k, v in old.items() if k not in ("event_id", "kind", "sequence")}
    assert correlated["element_instance_key"] == "e2" and second[1]["event_id"] != k1[0]["event_id"]
    assert events(spark, [correlation(1, element="e2")], k1 + second) == []


def test_a_removed_correlation_is_retracted_and_one_that_comes_back_gets_a_new_id(spark, first):
    k1 = [e for e in first if e["correlation_key"] == "k1"]
    [gone] = events(spark, [], k1)
    assert (gone["kind"], gone["sequence"], gone["correlation_key"]) == ("RETRACTED", 2, "k1")
    assert json.loads(gone["payload"])["variables"] == {"b": [1, {"c": None}], "a": "é"}
    [back] = events(spark, [correlation(1)], k1 + [gone])
    assert (back["kind"], back["sequence"]) == ("CORRELATED", 3)
    assert back["event_id"] not in (k1[0]["event_id"], gone["event_id"])
    assert events(spark, [correlation(1)], k1 + [gone, back]) == []


def test_held_back_correlations_wait_for_their_time(spark):
    late = T0 + timedelta(minutes=5)
    rows = [correlation(1), correlation(2, at=late, variables=None)]
    [now] = events(spark, rows, [], due_until=int(T0.timestamp() * 1000))
    assert now["message_key"] == 1
    [later] = events(spark, rows, [now], due_until=int(late.timestamp() * 1000))
    assert (later["message_key"], later["sequence"]) == (2, 2)
    assert json.loads(later["payload"])["variables"] is None
    gold = spark.createDataFrame(rows, CORRELATION)
    assert [tuple(r) for r in due_keys(gold, int(T0.timestamp() * 1000), int(late.timestamp() * 1000)).collect()] == [
        ("t", "k1")]


def test_each_empty_key_message_is_a_line_of_its_own_which_a_key_that_reads_the_same_shares(spark):
    """Revision 3: an empty key's events are ordered by `#<message_key>`, not in one line per tenant."""
    rows = events(spark, [correlation(7, key=""), correlation(8, key=""), correlation(9, key="#7", element="e2")], [])
    assert [(e["correlation_key"], e["ordering_key"], e["message_key"], e["sequence"]) for e in
            sorted(rows, key=lambda e: e["message_key"])] == [("", "#7", 7, 1), ("", "#8", 8, 1), ("#7", "#7", 9, 2)]
    assert all(e["partition"] == partition_of("t", e["ordering_key"], PARTITIONS) for e in rows)
    assert {json.loads(e["payload"])["ordering_key"] for e in rows} == {"#7", "#8"}


def test_an_event_written_before_revision_3_keeps_its_sequence_and_its_line_goes_on_after_it(spark):
    """A pre-revision-3 event of an empty key: numbered in its tenant's one line (here 5),
    no ordering_key in its payload. Retracted, the retraction follows it in `#<message_key>`."""
    [new] = events(spark, [correlation(7, key="")], [])
    old = new | {"sequence": 5, "ordering_key": None,
                 "payload": json.dumps({k: v for k, v in json.loads(new["payload"]).items() if k != "ordering_key"})}
    [gone] = events(spark, [], [old])
    assert (gone["kind"], gone["ordering_key"], gone["sequence"]) == ("RETRACTED", "#7", 6)


def test_a_run_renumbers_a_shared_line_with_every_key_on_it(spark, monkeypatch):
    """`run/outbox.new_events`: a run whose scope holds one key of a line (the empty key, or
    a key `#7`) is given the other key's correlations and events on it: its events follow
    theirs, and theirs are not retracted."""
    monkeypatch.setenv("CORRELAKE_DELIVERY_DELAY", "0")
    empty, hashed = correlation(7, key=""), correlation(9, key="#7", element="e2")
    for old, new in ((hashed, empty), (empty, hashed)):
        [before] = events(spark, [old], [])
        gold = spark.createDataFrame([old], CORRELATION)
        outbox = spark.createDataFrame([tuple(before[f] for f in OUTBOX.fieldNames())], OUTBOX)
        touched = spark.createDataFrame([("t", new[3])], "tenant_id string, correlation_key string")
        lake = Tables(spark, {"outbox": outbox, "correlations": gold})
        rows, _ = new_events(lake, Spark(lake), "r", None, lambda: None, spark.createDataFrame([new], CORRELATION),
                             touched)
        assert [(r["kind"], r["ordering_key"], r["message_key"], r["sequence"]) for r in rows.collect()] == [
            ("CORRELATED", "#7", new[0], 2)]


def test_the_ordering_key_twins_agree(spark):
    keys = [("", 7), ("", 0), ("k", 7), ("#7", 7), ("é ☃", 1 << 62)]
    df = spark.createDataFrame(keys, "correlation_key string, message_key bigint")
    got = df.select(ordering_key_column(F.col("correlation_key"), F.col("message_key")),
                    may_share_a_line_column(F.col("correlation_key"))).collect()
    assert [r[0] for r in got] == [ordering_key(k, m) for k, m in keys] == ["#7", "#0", "k", "#7", "é ☃"]
    assert [r[1] for r in got] == [may_share_a_line(k) for k, _ in keys] == [True, True, False, True, False]


def test_the_partition_twins_agree(spark):
    keys = [(t, f"{k}-{i}") for i in range(300) for t, k in (("<default>", "order"), ("tenant-é", "clé ☃ 𝄞"),
                                                            ("a\u0000b", "c"))]
    df = spark.createDataFrame(keys, "tenant_id string, correlation_key string")
    got = df.select("tenant_id", "correlation_key", partition(F.col("tenant_id"), F.col("correlation_key"),
                                                              PARTITIONS).alias("p")).collect()
    assert {(r[0], r[1]): r[2] for r in got} == {(t, k): partition_of(t, k, PARTITIONS) for t, k in keys}


def test_a_run_also_emits_what_fell_due_and_a_lake_without_outbox_gets_every_correlation(spark, monkeypatch):
    """`run/outbox.new_events`: with a delay, the keys whose held-back correlations fell due
    since the last as_of join the run's touched keys; with no outbox yet, every key of gold does."""
    ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731
    gold = spark.createDataFrame([correlation(1), correlation(2, key="k2", at=T0 + timedelta(minutes=1)),
                                  correlation(3, key="k3", at=T0 + timedelta(minutes=5))], CORRELATION)
    touched = spark.createDataFrame([("t", "k4")], "tenant_id string, correlation_key string")
    new = spark.createDataFrame([correlation(4, key="k4")], CORRELATION)
    [k1] = events(spark, [correlation(1)], [])
    outbox = spark.createDataFrame([tuple(k1[f] for f in OUTBOX.fieldNames())], OUTBOX)

    def emitted(tables: dict, **kwargs) -> tuple[list, bool]:
        lake = Tables(spark, tables)
        rows, backfill = new_events(lake, Spark(lake), "r", ms(T0 + timedelta(minutes=3)), lambda: ms(T0), new,
                                    touched, **kwargs)
        return sorted((r["correlation_key"], r["kind"], r["sequence"]) for r in rows.collect()), backfill

    monkeypatch.setenv("CORRELAKE_DELIVERY_DELAY", "60")  # due until T0 + 2 min; the last run's until T0 - 1 min
    assert emitted({"outbox": outbox, "correlations": gold}) == ([("k2", "CORRELATED", 1), ("k4", "CORRELATED", 1)],
                                                                 False)
    monkeypatch.setenv("CORRELAKE_DELIVERY_DELAY", "0")
    assert emitted({"correlations": gold}) == ([(k, "CORRELATED", 1) for k in ("k1", "k2", "k3", "k4")], True)


def test_a_delay_holds_a_correlation_back_until_a_run_whose_as_of_is_late_enough(spark, tmp_path, monkeypatch,
                                                                                 capsys):
    """End to end: with CORRELAKE_DELIVERY_DELAY, a run puts no event for a correlation younger
    than as_of − delay; a later status refresh (nothing new, as_of moved) emits it; the same
    command again changes nothing."""
    monkeypatch.setenv("CORRELAKE_DELIVERY_DELAY", "60")
    messages = [{"position": 1, "name": "m", "correlation_key": "k", "published_at": "2026-01-01T00:00:00Z",
                 "ttl_ms": 3_600_000}]
    opened = [{"position": 2, "type": "SUBSCRIPTION_OPENED", "timestamp": "2026-01-01T00:00:01Z",
               "bpmn_process_id": "p", "process_version": 1, "process_instance_key": "i", "element_instance_key": "e",
               "element_id": "x", "element_type": "RECEIVE_TASK", "message_name": "m", "correlation_key": "k"}]
    lake = str(tmp_path / "lake")
    run = ["run", "--landing", str(write_landing(tmp_path / "landing", messages, opened)), "--lake", lake]

    def outbox() -> list[tuple]:  # read with delta-rs
        return [tuple(r.values()) for r in table_rows(lake, "outbox", lambda _: ["kind", "message_key", "sequence"])]

    assert cli.main(run) == 0 and outbox() == []  # correlated at as_of itself: 60 s too young
    capsys.readouterr()
    later = [*run, "--as-of", "2026-01-01T00:02:00Z"]
    assert cli.main(later) == 0
    assert "1 held-back outbox events fell due" in capsys.readouterr().out
    assert outbox() == [("CORRELATED", 1, 1)]
    before = versions(lake)
    assert cli.main(later) == 0 and versions(lake) == before


def test_an_outbox_of_revision_2_is_migrated_by_the_first_run_and_delivered_before(spark, tmp_path, capsys):
    """A lake whose outbox a version before revision 3 wrote (no ordering_key; a tenant's
    empty-key events numbered in one line, routed by it): a pass before any new run already
    sends each with its ordering key; the first run gives every event its ordering key and
    keeps its id, sequence, partition and payload; an empty-key message after it starts a line
    of its own; the same run again changes nothing."""
    at = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    deployed = {"position": 1, "type": "PROCESS_DEPLOYED", "timestamp": at, "bpmn_process_id": "order",
                "process_version": 1, "message_start_events": ["placed"]}
    placed = lambda position: {"position": position, "name": "placed", "correlation_key": "",  # noqa: E731
                               "published_at": at + position * 1000}
    lake, landing = str(tmp_path / "lake"), tmp_path / "landing"
    run = ["run", "--landing", str(landing), "--lake", lake]
    write_landing(landing, [placed(2), placed(3)], [deployed], "first")
    assert cli.main(run) == 0
    path = table_path(lake, "outbox")
    current = spark.read.format("delta").load(path)
    line = F.row_number().over(Window.partitionBy("tenant_id", "correlation_key").orderBy("message_key"))
    old = (current.drop("ordering_key").withColumn("sequence", line.cast("bigint"))
           .withColumn("partition", partition(F.col("tenant_id"), F.col("correlation_key"), 8))
           .withColumn("payload", F.regexp_replace("payload", '"ordering_key":"[^"]*",', ""))
           .withColumn("payload", F.regexp_replace("payload", '"sequence":1,"partition":[0-9]+',
                                                   F.concat(F.lit('"sequence":'), F.col("sequence").cast("string"),
                                                            F.lit(',"partition":'), F.col("partition").cast("string"))))
           .localCheckpoint())
    old.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    journal.mark_published(lake)
    written = {r["event_id"]: r.asDict() for r in old.collect()}
    assert sorted((r["message_key"], r["sequence"]) for r in written.values()) == [(2, 1), (3, 2)]

    receiver = Receiver()
    try:
        assert cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", receiver.url]) == 0
        sent = [json.loads(body) for _, body in receiver.headers]
    finally:
        receiver.close()
    assert sorted((e["ordering_key"], e["sequence"], list(e)[:3]) for e in sent) == [
        ("#2", 1, ["event_id", "kind", "ordering_key"]), ("#3", 2, ["event_id", "kind", "ordering_key"])]
    assert all(e["partition"] == partition_of("<default>", e["ordering_key"], 8) for e in sent)
    capsys.readouterr()

    write_landing(landing, [placed(4)], [], "second")
    assert cli.main(run) == 0
    assert "migrated delivery/outbox to contract revision 3 first: its 2 events got their ordering key" in (
        capsys.readouterr().out)
    after = {r["event_id"]: r.asDict() for r in spark.read.format("delta").load(path).collect()}
    for event_id, row in written.items():
        assert after[event_id] == row | {"ordering_key": f"#{row['message_key']}"}
    [new] = [r for r in after.values() if r["message_key"] == 4]
    assert (new["ordering_key"], new["sequence"], json.loads(new["payload"])["ordering_key"]) == ("#4", 1, "#4")
    before = versions(lake)
    assert cli.main(run) == 0 and versions(lake) == before
