"""examples/zeebe/: the exported records of its README, run through the pipeline once, give
what the README's table works out by hand from the contract (revision 4) and semantics.md:
4 correlations, the messages' statuses, the subscriptions, the instance a message started
(its end named by the engine's key), the engine's 5 correlations and the one difference
(ONLY_ENGINE after the deadline), the 2 unmapped records, 17 replays of overlapping dumps."""

from __future__ import annotations

import shutil

import pytest
from support.helpers import read_gold

from correlake.config import PROJECT_ROOT
from correlake.lake import catalog
from correlake.run import pipeline

T0 = 1796115600000  # 2026-12-01T09:00:00Z
P1, P2 = 1 << 51, 2 << 51  # Zeebe keys carry their partition in the bits from 51 up
M1, M2, M5, M6, M7, M4 = (P2 + n for n in (3, 9, 15, 16, 22, 29))  # the messages, by the README's story
I1, T1, I2, T2, I3, T3, I6, GW, I5, T5 = (P1 + n for n in (8, 11, 15, 18, 21, 24, 25, 28, 31, 34))
REFUND = f"msg-start:refund:{M7}"


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("zeebe_example")
    landing = root / "landing"
    shutil.copytree(PROJECT_ROOT / "examples" / "zeebe" / "landing", landing)  # runs leave the example as it is
    result = pipeline.run(spark, str(landing), str(root / "lake"))
    catalog.register(spark, str(root / "lake"))
    return str(root / "lake"), result


def test_the_run_reads_every_line(lake):
    _, result = lake
    assert (result.records_read, result.replays, result.quarantined_total) == (216, 17, 0)
    assert (result.correlations, result.unmapped, result.engine_correlations) == (4, 2, 5)
    assert result.as_of == T0 + 25_003  # the last mapped record: o-5's task completed


def test_gold(spark, lake):
    gold = read_gold(lake[0])
    assert sorted((c["message_key"], c["bpmn_process_id"], c["process_instance_key"], c["element_instance_key"],
                   c["element_id"], c["subscription_type"], c["correlated_at"]) for c in gold["correlations"]) == [
        (M1, "order-fulfilment", str(I1), str(T1), "wait-for-payment", "CATCH", T0 + 5_000),
        (M2, "order-fulfilment", str(I2), str(T2), "cancelled", "CATCH", T0 + 8_000),
        (M6, "delivery-tracking", str(I6), str(GW), "delivered", "CATCH", T0 + 15_000),  # buffered since 12
        (M7, "refund", REFUND, None, None, "START", T0 + 18_000)]
    assert sorted((m["message_key"], m["status"]) for m in gold["messages"]) == [
        (M1, "CORRELATED"), (M2, "CORRELATED"), (M5, "EXPIRED"), (M6, "CORRELATED"), (M7, "CORRELATED"),
        (M4, "BUFFERED")]
    assert sorted((s["element_instance_key"], s["message_name"], s["element_type"], s["close_reason"])
                  for s in gold["subscriptions"]) == sorted([
        (str(T1), "payment-received", "RECEIVE_TASK", "CORRELATED"),
        (str(T1), "order-cancelled", "BOUNDARY_EVENT", "SIBLING_CORRELATED"),
        (str(T2), "payment-received", "RECEIVE_TASK", "SIBLING_CORRELATED"),
        (str(T2), "order-cancelled", "BOUNDARY_EVENT", "CORRELATED"),
        (str(T3), "payment-received", "RECEIVE_TASK", None), (str(T3), "order-cancelled", "BOUNDARY_EVENT", None),
        (str(GW), "parcel-delivered", "EVENT_BASED_GATEWAY", "CORRELATED"),
        (str(GW), "parcel-lost", "EVENT_BASED_GATEWAY", "SIBLING_CORRELATED"),
        (str(T5), "payment-received", "RECEIVE_TASK", "ELEMENT_LEFT"),
        (str(T5), "order-cancelled", "BOUNDARY_EVENT", "ELEMENT_LEFT")])
    assert [(s["process_instance_key"], s["message_key"], s["started_at"], s["ended_at"])
            for s in gold["message_started_instances"]] == [(REFUND, M7, T0 + 18_000, T0 + 19_000)]


def test_the_audit_and_the_unmapped_records(spark, lake):
    engine = {(r.message_key, r.subscription_type, r.process_instance_key) for r in
              spark.sql("SELECT * FROM gold_engine_correlations").collect()}
    assert engine == {(M1, "CATCH", str(I1)), (M2, "CATCH", str(I2)), (M6, "CATCH", str(I6)), (M5, "CATCH", str(I5)),
                      (M7, "START", REFUND)}
    assert [tuple(r) for r in spark.sql(
        "SELECT message_key, bpmn_process_id, difference, explanation, engine_element_instance_key "
        "FROM engine_differences").collect()] == [(M5, "order-fulfilment", "ONLY_ENGINE", "AFTER_DEADLINE", str(T5))]
    assert sorted(tuple(r) for r in spark.sql(
        "SELECT partition_id, position, value_type, intent, why FROM unmapped_engine_records").collect()) == [
        (1, 144, "PROCESS_MESSAGE_SUBSCRIPTION", "CREATING", "NO_DEFINITION"),
        (1, 145, "PROCESS", "DELETED", "RESOURCE_DELETION")]
