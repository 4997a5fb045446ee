"""`correlake deliver --sink webhook` against a real HTTP receiver in this process: order per
ordering key, retries, group cancellation, timeouts, expiry, requeue, the lock, the
signature, a killed pass. No Spark but in the last test: the outbox is written with delta-rs.

Order is per ordering key (tenant_id, ordering_key): tenant t2 has events of one of the
default tenant's correlation keys, and the order checks assert that, by correlation key
alone, the same requests would fail them; and two messages of t2 with an empty correlation
key, each its own line (`#<message_key>`, contract revision 3)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from standardwebhooks.webhooks import Webhook
from support.delivery_helpers import TENANT, Receiver, by_key_alone, event, not_in_sequence, out_of_order, write_outbox
from support.ports import refused_port

from correlake.config import table_path
from correlake.delivery.events import partition_of
from correlake.interfaces import cli
from correlake.lake.lock import held

FAST_RETRY = ["--retry-base", "0.01", "--retry-cap", "0.05"]
GROUP = 21  # order-2's first two events: one message correlated twice
SHARED = "order-0"  # the correlation key of both tenants' events


def _rows() -> list[dict]:
    rows = [event(TENANT, f"order-{k}", s, GROUP if (k, s) == (2, 2) else k * 10 + s)
            for k in range(6) for s in (1, 2, 3)]
    return rows + [event("t2", SHARED, s, 100 + s) for s in (1, 2)] + [event("t2", "", 1, m) for m in (200, 201)]


ROWS = _rows()
EVENT = {(r["tenant_id"], r["ordering_key"], r["sequence"]): r["event_id"] for r in ROWS}


@pytest.fixture(scope="module")
def outbox_lake(tmp_path_factory) -> Path:
    lake = tmp_path_factory.mktemp("outbox") / "lake"
    write_outbox(str(lake), ROWS)
    return lake


@pytest.fixture
def lake(outbox_lake, tmp_path) -> str:
    """A copy of the outbox lake, nothing delivered yet."""
    return str(shutil.copytree(outbox_lake, tmp_path / "lake"))


@pytest.fixture(scope="module")
def module_receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def receiver(module_receiver):
    module_receiver.reset()
    return module_receiver


def deliver(lake: str, receiver: Receiver, *options: str, capsys=None) -> tuple[int, str]:
    code = cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", receiver.url, *options])
    return code, capsys.readouterr().out if capsys else ""


def state(lake: str) -> dict[str, dict]:
    return {r["event_id"]: r for r in DeltaTable(table_path(lake, "delivery_state")).to_pyarrow_table().to_pylist()}


def attempts(lake: str) -> list[dict]:
    rows = DeltaTable(table_path(lake, "delivery_attempts")).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: (r["at"], r["event_id"]))


def statuses(lake: str) -> Counter:
    return Counter(r["status"] for r in state(lake).values())


def assert_in_order(receiver: Receiver) -> None:
    """Each ordering key's events applied in sequence order by the idempotent receiver (a
    killed pass's batch sent again comes as duplicates), where by correlation key alone they
    are not: t2 went on while TENANT waited."""
    assert out_of_order(receiver.applied_rows()) == {}
    assert list(out_of_order(by_key_alone(receiver.applied_rows()))) == [("*", SHARED)]


def test_every_event_acknowledged_once_in_key_order(lake, receiver, capsys):
    code, out = deliver(lake, receiver, "--partitions", "3", capsys=capsys)
    assert code == 0
    assert set(receiver.applied) == set(EVENT.values()) and len(receiver.requests) == len(ROWS)
    assert not_in_sequence(receiver.rows()) == {}  # each ordering key's 1, 2, 3 once, in order
    assert list(not_in_sequence(by_key_alone(receiver.rows()))) == [("*", SHARED)]  # both tenants' 1, 2
    assert statuses(lake) == {"ACKED": len(ROWS)}
    assert all(r["attempts"] == 1 and r["last_error"] is None for r in state(lake).values())
    assert [a["outcome"] for a in attempts(lake)] == ["ACK"] * len(ROWS)
    assert (f"{len(ROWS)} events sent in {len(ROWS)} attempts (0 answered with a retry), {len(ROWS)} acknowledged, "
            "0 dead letters") in out and "last error" not in out
    assert f"ACKED {len(ROWS)}, AWAITED 0" in out
    for headers, body in receiver.headers:  # routed by this pass's 3 partitions, not the outbox's 8
        sent = json.loads(body)
        assert sent["partition"] == partition_of(sent["tenant_id"], sent["ordering_key"], 3)
        assert sent["ordering_key"] == (sent["correlation_key"] or f"#{sent['message_key']}")
        assert headers["Idempotency-Key"] == sent["event_id"] and headers["Content-Type"] == "application/json"
        assert "X-Correlake-Signature" not in headers
    assert deliver(lake, receiver)[0] == 0 and len(receiver.requests) == len(ROWS)  # nothing due: nothing sent


def test_retries_then_acknowledged_and_the_key_waits(lake, receiver, capsys):
    """The key's later events wait for its head; t2's events of the same correlation key do not."""
    head = EVENT[(TENANT, SHARED, 1)]
    receiver.script[head] = [500, 503, 429]
    code, out = deliver(lake, receiver, *FAST_RETRY, capsys=capsys)
    assert code == 0 and f"{len(ROWS)} events sent in {len(ROWS) + 3} attempts (3 answered with a retry)" in out
    assert "last error: HTTP 429" in out and "; 0 events wait for a retry" in out
    assert receiver.sequences()[(TENANT, SHARED)] == [1, 1, 1, 1, 2, 3]
    assert receiver.sequences()[("t2", SHARED)] == [1, 2]
    assert_in_order(receiver)  # t2's 2 before TENANT's 1 acknowledged (its 4th try, in the 4th round or later)
    assert statuses(lake) == {"ACKED": len(ROWS)} and state(lake)[head]["attempts"] == 4
    tried = [(a["attempt"], a["outcome"], a["detail"]) for a in attempts(lake) if a["event_id"] == head]
    assert tried == [(1, "RETRY", "HTTP 500 Internal Server Error"), (2, "RETRY", "HTTP 503 Service Unavailable"),
                     (3, "RETRY", "HTTP 429 Too Many Requests"), (4, "ACK", "HTTP 200 OK")]


@pytest.mark.parametrize("status", [408, 425])
def test_408_and_425_are_retried_not_rejected(lake, receiver, status):
    """Contract *Webhook*: 408 and 425 are recoverable like 429 and 5xx (retried with
    back-off), not a rejection that would cancel the event's group."""
    head = EVENT[(TENANT, "order-1", 1)]
    receiver.script[head] = [status]
    assert deliver(lake, receiver, *FAST_RETRY)[0] == 0
    assert statuses(lake) == {"ACKED": len(ROWS)} and state(lake)[head]["attempts"] == 2
    assert [a["outcome"] for a in attempts(lake) if a["event_id"] == head] == ["RETRY", "ACK"]
    assert receiver.sequences()[(TENANT, "order-1")] == [1, 1, 2, 3]


def test_a_503_in_the_middle_of_a_chain_holds_the_rest_of_it(lake, receiver, capsys):
    """A key's chain goes in one batch; its second event answered 503: the third is not sent
    (HELD, no attempt) until the second is acknowledged; the other keys go on."""
    middle, last = EVENT[(TENANT, "order-4", 2)], EVENT[(TENANT, "order-4", 3)]
    receiver.script[middle] = [503]
    code, out = deliver(lake, receiver, *FAST_RETRY, capsys=capsys)
    assert code == 0 and f"{len(ROWS)} events sent in {len(ROWS) + 1} attempts (1 answered with a retry)" in out
    assert receiver.sequences()[(TENANT, "order-4")] == [1, 2, 2, 3]
    assert out_of_order(receiver.applied_rows()) == {}
    assert statuses(lake) == {"ACKED": len(ROWS)}
    assert [a["outcome"] for a in attempts(lake) if a["event_id"] == last] == ["ACK"]  # held: no attempt
    assert [a["outcome"] for a in attempts(lake) if a["event_id"] == middle] == ["RETRY", "ACK"]


def test_a_retry_not_due_waits_for_the_next_pass(lake, receiver, capsys):
    head = EVENT[(TENANT, "order-3", 1)]
    receiver.script[head] = [502]
    code, out = deliver(lake, receiver, "--retry-base", "3600", "--retry-cap", "3600", "--max-seconds", "2",
                        capsys=capsys)
    assert code == 0 and "AWAITED 1" in out and "PENDING 2" in out  # the key's later events wait
    row = state(lake)[head]
    assert row["status"] == "AWAITED" and row["next_attempt_at"] is not None and row["last_error"].startswith("HTTP 502")
    assert receiver.sequences()[(TENANT, "order-3")] == [1]


def test_a_rejection_cancels_its_group_only(lake, receiver, capsys):
    first, second = EVENT[(TENANT, "order-2", 1)], EVENT[(TENANT, "order-2", 2)]
    receiver.script[first] = [400]
    code, out = deliver(lake, receiver, capsys=capsys)
    assert code == 0 and "2 dead letters" in out and "CANCELLED 2" in out
    rows = state(lake)
    assert rows[first]["status"] == rows[second]["status"] == "CANCELLED"
    assert rows[first]["last_error"] == "HTTP 400 Bad Request"
    assert rows[second]["last_error"].startswith(f"cancelled with its group (message_key {GROUP}): event {first}")
    assert receiver.sequences()[(TENANT, "order-2")] == [1, 3]  # the group's second never sent; the key goes on
    assert {e for e, r in rows.items() if r["status"] == "ACKED"} == set(EVENT.values()) - {first, second}
    assert [(a["event_id"], a["outcome"]) for a in attempts(lake) if a["outcome"] in ("REJECT", "CANCELLED")] == \
        [(first, "REJECT"), (second, "CANCELLED")]


def test_an_answer_slower_than_the_timeout_is_retried(lake, receiver):
    slow = EVENT[(TENANT, "order-4", 2)]
    receiver.script[slow] = [(200, 1.5)]
    assert deliver(lake, receiver, "--timeout", "0.3", *FAST_RETRY)[0] == 0
    assert statuses(lake) == {"ACKED": len(ROWS)}
    tried = [(a["outcome"], a["detail"]) for a in attempts(lake) if a["event_id"] == slow]
    assert tried == [("RETRY", "no answer within 0.3 s"), ("ACK", "HTTP 200 OK")]
    assert receiver.sequences()[(TENANT, "order-4")] == [1, 2, 2, 3]


def test_expiry_unblocks_the_key_and_requeue_delivers_the_dead_letter(lake, receiver, capsys):
    stuck = EVENT[(TENANT, "order-5", 1)]
    receiver.script[stuck] = [500] * 1000
    code, out = deliver(lake, receiver, "--delivery-ttl", "0.5", "--retry-base", "0.05", "--retry-cap", "0.1",
                        capsys=capsys)
    assert code == 0 and "EXPIRED 1" in out
    row = state(lake)[stuck]
    assert row["status"] == "EXPIRED" and row["last_error"].startswith("not acknowledged within 0.5 s")
    assert receiver.sequences()[(TENANT, "order-5")][-2:] == [2, 3]
    assert statuses(lake) == {"ACKED": len(ROWS) - 1, "EXPIRED": 1}

    receiver.reset()
    code, out = deliver(lake, receiver, "--requeue-dead-letters", "--event-id", stuck, capsys=capsys)
    assert code == 0 and "1 requeued" in out and "1 acknowledged" in out
    assert receiver.requests[0][0] == stuck and len(receiver.requests) == 1  # after its key's later events
    assert statuses(lake) == {"ACKED": len(ROWS)}
    assert [a["outcome"] for a in attempts(lake) if a["event_id"] == stuck][-3:] == ["EXPIRED", "REQUEUED", "ACK"]


def test_requeue_by_message_key(lake, receiver, capsys):
    receiver.script[EVENT[(TENANT, "order-2", 1)]] = [404]
    deliver(lake, receiver)
    assert statuses(lake)["CANCELLED"] == 2
    code, out = deliver(lake, receiver, "--requeue-dead-letters", "--message-key", str(GROUP), capsys=capsys)
    assert code == 0 and "2 requeued" in out and statuses(lake) == {"ACKED": len(ROWS)}
    assert receiver.sequences()[(TENANT, "order-2")] == [1, 3, 1, 2]


def test_a_second_pass_at_the_same_time_sends_nothing(lake, receiver, capsys):
    with held(lake, "delivery.lock"):
        code, _ = deliver(lake, receiver)
    err = capsys.readouterr().err
    assert code == 0 and "another delivery pass holds" in err and "sent nothing" in err
    assert receiver.requests == [] and not Path(table_path(lake, "delivery_state")).exists()


def test_signature_verifies_and_the_secret_is_never_shown(lake, receiver, capsys, monkeypatch):
    key = b"k3y-of-the-hook-32-bytes-long..."
    secret = "whsec_" + base64.b64encode(key).decode()  # Standard Webhooks' form (contract revision 4)
    monkeypatch.setenv("CORRELAKE_WEBHOOK_SECRET", secret)
    receiver.script[EVENT[(TENANT, "order-0", 1)]] = [500]
    code, out = deliver(lake, receiver, *FAST_RETRY, capsys=capsys)
    assert code == 0
    for headers, body in receiver.headers:  # each attempt, the retried one's too, checked by the scheme's library
        assert Webhook(secret).verify(body, headers)["event_id"] == headers["webhook-id"]
        want = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Correlake-Signature"], want)
    shown = out + capsys.readouterr().err + repr(attempts(lake)) + repr(state(lake))
    assert secret[6:] not in shown


def test_credentials_from_files_none_on_the_command_line(lake, receiver, capsys, monkeypatch, tmp_path):
    """The URL names the user only: the Basic password and the signing secret come from the
    files CORRELAKE_SINK_PASSWORD_FILE and CORRELAKE_WEBHOOK_SECRET_FILE name, and neither is shown."""
    password, secret = "pa55:w/rd é", "whsec_" + base64.b64encode(b"s" * 32).decode()
    for name, value in (("CORRELAKE_SINK_PASSWORD", password), ("CORRELAKE_WEBHOOK_SECRET", secret)):
        (tmp_path / name).write_text(value + "\n")
        monkeypatch.setenv(f"{name}_FILE", str(tmp_path / name))
    code = cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", receiver.url.replace("://", "://hook@")])
    shown = capsys.readouterr()
    assert code == 0 and statuses(lake) == {"ACKED": len(ROWS)}
    basic = "Basic " + base64.b64encode(f"hook:{password}".encode()).decode()
    for headers, body in receiver.headers:
        assert headers["Authorization"] == basic and Webhook(secret).verify(body, headers)
    recorded = shown.out + shown.err + repr(attempts(lake)) + repr(state(lake))
    assert password not in recorded and secret[6:] not in recorded
    monkeypatch.setenv("CORRELAKE_WEBHOOK_SECRET", secret)  # and in its file: which one is meant?
    assert deliver(lake, receiver) == (2, "")
    assert "CORRELAKE_WEBHOOK_SECRET and CORRELAKE_WEBHOOK_SECRET_FILE are both set" in capsys.readouterr().err


def test_usage_errors_exit_2_and_hide_passwords(lake, receiver, capsys, tmp_path):
    assert cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", "ftp://u:pw@host/x"]) == 2
    err = capsys.readouterr().err
    assert "must be http:// or https://" in err and "pw" not in err and "u:***@host" in err
    assert cli.main(["deliver", "--lake", str(tmp_path / "none"), "--sink", "webhook", "--url", receiver.url]) == 2
    assert cli.main(["deliver", "--lake", lake, "--sink", "webhook"]) == 2
    assert cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", receiver.url, "--event-id", "x"]) == 2
    assert receiver.requests == []


def test_nothing_to_deliver_before_a_run_published(tmp_path, receiver, capsys):
    (tmp_path / "lake").mkdir()
    code, out = deliver(str(tmp_path / "lake"), receiver, capsys=capsys)
    assert code == 0 and "nothing to deliver yet" in out and receiver.requests == []


def test_a_killed_pass_then_another_delivers_each_event_once_in_effect(lake, receiver):
    """SIGKILL mid-pass (a slow receiver, one lane); the next pass sends the unrecorded batch
    again; the idempotent receiver applies each event once, each ordering key in order. t2's
    first event is answered 503 twice: its third try comes in a later batch than TENANT's
    second event of the same correlation key."""
    receiver.reset(delay=0.25)
    receiver.script[EVENT[("t2", SHARED, 1)]] = [503, 503]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(cli.__file__).parents[2]), os.environ.get(
        "PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-m", "correlake.interfaces.cli", "deliver", "--lake", lake, "--sink",
                              "webhook", "--url", receiver.url, "--partitions", "1", *FAST_RETRY], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while len(receiver.requests) < 10 and time.monotonic() < deadline:  # mid-batch
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    before = len(receiver.requests)
    assert 10 <= before < len(ROWS)
    receiver.delay = 0.0
    assert deliver(lake, receiver, *FAST_RETRY)[0] == 0
    assert set(receiver.applied) == set(EVENT.values()) and len(receiver.requests) > len(ROWS)  # some twice
    assert_in_order(receiver)
    assert statuses(lake) == {"ACKED": len(ROWS)}


def test_delivery_tables_read_by_spark_and_the_backlog_a_bounded_pass_leaves(lake, receiver, spark, capsys):
    """A pass that cannot finish in its bound (a head waiting for a retry an hour away) says
    how many events wait and since when; the view `delivery_backlog` says it per tenant.
    The tables delta-rs wrote read the same in Spark."""
    from correlake.lake import catalog

    receiver.script[EVENT[(TENANT, "order-0", 1)]] = [500]
    code, out = deliver(lake, receiver, "--retry-base", "3600", "--retry-cap", "3600", "--max-seconds", "1",
                        capsys=capsys)
    assert code == 0 and "3 events wait for a later pass, the longest since " in out  # order-0's 1, 2, 3
    for name in ("delivery_state", "delivery_attempts", "outbox"):
        ours = DeltaTable(table_path(lake, name)).to_pyarrow_table().to_pylist()
        theirs = [r.asDict() for r in spark.read.format("delta").load(table_path(lake, name)).collect()]
        spark.read.format("delta").load(table_path(lake, name)).createOrReplaceTempView(name)
        key = (lambda r: (r["event_id"], r.get("attempt")))
        assert len(theirs) == len(ours) and sorted(map(key, theirs)) == sorted(map(key, ours))
    views = catalog.views()
    for name in ("delivery_events", "delivery_backlog"):
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {views[name].sql}")
    [backlog] = [r.asDict() for r in spark.sql("SELECT * FROM delivery_backlog").collect()]
    assert {k: backlog[k] for k in ("tenant_id", "waiting", "ordering_keys", "awaiting_retry", "a_last_error")} == {
        "tenant_id": TENANT, "waiting": 3, "ordering_keys": 1, "awaiting_retry": 1, "a_last_error": "HTTP 500 "
        "Internal Server Error"}
    assert backlog["oldest_age_s"] > 0


def test_a_later_run_s_events_are_delivered_and_nothing_else_again(lake, receiver, monkeypatch):
    """A pass registers the events of the outbox's files added since the version it
    registered last (it reads neither the outbox's older files nor every id of the state);
    after a registration cut short, it compares every id, and registers none twice."""
    from correlake.delivery import deliver as delivery

    deliver(lake, receiver)
    later = [event(TENANT, "order-0", 4, 4), event(TENANT, "order-9", 1, 91)]
    write_outbox(lake, later)  # as the next run publishes them
    receiver.reset()
    every_id = []
    read_state = delivery.tables.read_state
    monkeypatch.setattr(delivery.tables, "read_state", lambda lake, columns=None, statuses=None: (
        every_id.append(columns) if statuses is None else None) or read_state(lake, columns, statuses))
    assert deliver(lake, receiver)[0] == 0 and every_id == []
    assert sorted(r[0] for r in receiver.requests) == sorted(r["event_id"] for r in later)
    assert statuses(lake) == {"ACKED": len(ROWS) + 2}
    receiver.reset()
    assert deliver(lake, receiver)[0] == 0 and receiver.requests == []
    third = [event(TENANT, "order-9", 2, 92)]
    write_outbox(lake, third)
    delivery._mark(lake, registering=True)  # a pass killed between its registration's two marks
    assert deliver(lake, receiver)[0] == 0 and every_id == [["event_id"]]
    assert [r[0] for r in receiver.requests] == [third[0]["event_id"]]
    assert DeltaTable(table_path(lake, "delivery_state")).to_pyarrow_table().num_rows == len(ROWS) + 3  # once each


def test_maintenance_prunes_the_attempts_of_events_final_past_the_retention(lake, receiver):
    """`correlake maintain`'s delivery part (delivery/retention.py): the attempts of events
    final since before the retention go (a dry run only counts them), those of an event
    still waiting stay, every state row stays; a pass holding the lock: nothing done."""
    from correlake.delivery import retention
    from correlake.delivery.deliver import DELIVERY_LOCK

    waiting = EVENT[(TENANT, "order-5", 1)]
    receiver.script[waiting] = [503]
    deliver(lake, receiver, "--retry-base", "3600", "--retry-cap", "3600", "--max-seconds", "1")
    tried = attempts(lake)
    assert retention.prune(lake, 1.0) == 0  # final for less than a day
    assert retention.prune(lake, 0.0, dry_run=True) == len(tried) - 1 and attempts(lake) == tried
    with held(lake, DELIVERY_LOCK):
        assert retention.prune(lake, 0.0) is None
    assert retention.prune(lake, 0.0) == len(tried) - 1
    assert [(a["event_id"], a["outcome"]) for a in attempts(lake)] == [(waiting, "RETRY")]
    assert len(state(lake)) == len(ROWS) and statuses(lake)["AWAITED"] == 1
    assert len(DeltaTable(table_path(lake, "delivery_attempts")).file_uris()) == 1  # compacted


class HoldingQueue:
    """A queue sink whose queues of the old partitions still hold events."""
    sent = []

    def drained(self, old_partitions: int) -> bool:
        return False

    def prepare(self, partitions: int) -> None:
        pass

    def send(self, events, until=None):
        self.sent.extend(events)
        return []

    def close(self) -> None:
        pass


def test_other_partitions_wait_until_the_sink_drained_the_old_ones(lake, receiver):
    from correlake.delivery import deliver as delivery

    receiver.script[EVENT[(TENANT, "order-0", 1)]] = [503]
    deliver(lake, receiver, "--partitions", "8", "--retry-base", "3600", "--max-seconds", "1")
    before = state(lake)
    result = delivery.deliver(lake, HoldingQueue(), delivery.Settings(partitions=4))
    assert result.note.startswith("the last pass routed by 8 partitions") and HoldingQueue.sent == []
    assert state(lake) == before and result.statuses["AWAITED"] == 1


def test_a_pass_compacts_tables_with_many_files_and_says_each_batch(lake, receiver, monkeypatch, capsys):
    monkeypatch.setattr("correlake.delivery.tables.DELIVERY_COMPACT_FILES", 2)
    monkeypatch.setattr("correlake.config.DELIVERY_BATCH_EVENTS", 8)
    monkeypatch.setenv("CORRELAKE_PROGRESS", "1")
    assert deliver(lake, receiver)[0] == 0  # 3 batches of at most 8 events: 3 appends to attempts
    said = re.findall(r"deliver: batch (\d): (\d+) events sent, (\d+) acknowledged", capsys.readouterr().err)
    assert [int(n) for _, n, _ in said] == [8, 8, len(ROWS) - 16] and all(n == a for _, n, a in said)
    appended = DeltaTable(table_path(lake, "delivery_attempts"))  # a file per batch, then one
    assert len(appended.file_uris()) == 1 and "OPTIMIZE" in [h["operation"] for h in appended.history(4)]
    assert len(DeltaTable(table_path(lake, "delivery_state")).file_uris()) <= 3  # a MERGE rewrites what it touches
    assert statuses(lake) == {"ACKED": len(ROWS)} and len(attempts(lake)) == len(ROWS)


def test_a_refused_connection_is_retried_later(lake, capsys):
    with refused_port() as port:  # nothing listens there
        code = cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", f"http://127.0.0.1:{port}/hook",
                         "--retry-base", "3600", "--max-seconds", "1"])
    assert code == 0 and "0 acknowledged" in capsys.readouterr().out
    heads = [r for r in state(lake).values() if r["status"] == "AWAITED"]
    assert len(heads) == len({(r["tenant_id"], r["ordering_key"]) for r in ROWS}) == 9  # each key's first event
    assert {r["last_error"] for r in heads} == {"connection refused"}
    assert {(a["outcome"], a["detail"]) for a in attempts(lake)} == {("RETRY", "connection refused")}


def test_a_pass_to_a_url_where_nothing_listens_names_the_cause_and_counts_events_not_attempts(lake, capsys):
    with refused_port() as port:
        code = cli.main(["deliver", "--lake", lake, "--sink", "webhook", "--url", f"http://127.0.0.1:{port}/hook",
                         "--max-seconds", "1", *FAST_RETRY])
    out = capsys.readouterr().out
    waiting = statuses(lake)["AWAITED"]
    heads = len({(r["tenant_id"], r["ordering_key"]) for r in ROWS})  # each key's first event, tried again and again
    assert code == 0 and waiting == heads
    assert f"this pass: {heads} events sent in " in out and "0 acknowledged" in out
    assert f"last error: connection refused; {heads} events wait for a retry" in out
