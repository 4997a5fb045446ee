"""Quiet points (`semantics/quiet.py`) against the reference model: replaying a key group from
the point `replay_from` gives the rows at or after it that the whole history gives, and
leaves the rows before it as the history alone gave them. Hand-worked cases first, then
Hypothesis over the generators' streams, their times stretched so that clusters part
(seeded from CORRELAKE_TEST_SEED)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st
from support.generators import BASE_MS, SEED, START_EVENTS, streams
from support.reference_model import distinct, millis, reference

from correlake.semantics.order import MESSAGE_PUBLISHED
from correlake.semantics.quiet import SINCE_COLUMNS, last_cluster, replay_from, spans

HOUR = 3_600_000
TABLES = ("messages", "correlations", "subscriptions", "message_started_instances")


def message(position, t, ttl_ms=HOUR, key="k", name="a", message_id=None):
    return {"position": position, "name": name, "correlation_key": key, "published_at": t, "ttl_ms": ttl_ms,
            "variables": {}, "message_id": message_id}


def opened(position, t, element="e1", instance="i1", name="a", key="k", process="P"):
    return {"position": position, "type": "SUBSCRIPTION_OPENED", "timestamp": t, "bpmn_process_id": process,
            "process_instance_key": instance, "element_instance_key": element, "element_id": "x",
            "element_type": "INTERMEDIATE_CATCH_EVENT", "message_name": name, "correlation_key": key}


def event(position, kind, t, **keys):
    return {"position": position, "type": kind, "timestamp": t, **keys}


def deployed(position, t, names=("a",), process="S"):
    return event(position, "PROCESS_DEPLOYED", t, bpmn_process_id=process, process_version=1,
                 message_start_events=list(names))


def engine_records(messages: list[dict], events: list[dict], gold: dict) -> list[dict]:
    """The landing records as the engine's (keys `quiet.entities` and `spans` read), accepted as `gold` says."""
    accepted = {m["message_key"] for m in gold["messages"] if m["duplicate_of"] is None}
    return ([{"kind": MESSAGE_PUBLISHED, "t": m["published_at"], "position": m["position"],
              "tenant_id": m["tenant_id"], "ttl_ms": m["ttl_ms"], "accepted": m["position"] in accepted}
             for m in distinct("messages", messages)]
            + [{"kind": e["type"], "t": e["timestamp"], "position": e["position"], "tenant_id": e["tenant_id"],
                "element_instance_key": e.get("element_instance_key"),
                "process_instance_key": e.get("process_instance_key")}
               for e in distinct("workflow_events", events)])


def cluster_of(messages: list[dict], events: list[dict], as_of: int | None = None) -> tuple:
    gold = reference(messages, events, as_of)
    return last_cluster(engine_records(messages, events, gold), gold["subscriptions"],
                        gold["message_started_instances"])


def rows(gold: dict, table: str, keep) -> list:
    column = SINCE_COLUMNS[table]
    return sorted((repr(sorted(r.items())) for r in gold[table] if keep(r[column])))


def check_run(history: tuple[list, list], new: tuple[list, list]) -> int | None:
    """A run adding `new` (messages, events) to `history`'s: where it replays from, and that its
    replay from there restates exactly what the whole history's would (None: from the first record)."""
    (old_m, old_e), (new_m, new_e) = history, new
    every_m, every_e = old_m + new_m, old_e + new_e
    as_of = max((millis(r.get("published_at", r.get("timestamp"))) for r in every_m + every_e), default=0)
    whole, before = reference(every_m, every_e, as_of), reference(old_m, old_e, as_of)
    old = engine_records(old_m, old_e, before)
    added = [dict(r, new=True) for r in engine_records(new_m, new_e, whole)]
    since = replay_from(last_cluster(old, before["subscriptions"], before["message_started_instances"]),
                        [dict(r, new=False) for r in old] + added)
    if since is None:
        return None
    every = engine_records(every_m, every_e, whole)
    assert all(hi < since or lo >= since for lo, hi in spans(every, whole["subscriptions"],
                                                              whole["message_started_instances"])), since
    replayed = reference([m for m in every_m if millis(m["published_at"]) >= since],
                         [e for e in every_e if millis(e["timestamp"]) >= since or e["type"] == "PROCESS_DEPLOYED"],
                         as_of)
    for table in TABLES:
        assert rows(replayed, table, lambda t: True) == rows(whole, table, lambda t: t >= since), table
        assert rows(before, table, lambda t: t < since) == rows(whole, table, lambda t: t < since), table
    return since


def test_a_long_open_subscription_keeps_the_key_group_from_its_opening():
    history = ([message(2, 5 * HOUR, ttl_ms=0, name="b")], [opened(1, 0)])
    assert cluster_of(*history) == (0, None)
    assert check_run(history, ([message(3, 9 * HOUR)], [])) == 0


def test_a_message_whose_ttl_spans_the_hour_is_replayed_with_it():
    history = ([message(1, 0, ttl_ms=2 * HOUR), message(2, 4 * HOUR, ttl_ms=0)], [])
    assert cluster_of(*history) == (4 * HOUR, 4 * HOUR)
    # the next hour's subscription opens after the last cluster: a cluster of its own
    assert check_run(history, ([], [opened(3, 5 * HOUR)])) == 5 * HOUR
    history = ([message(1, 0, ttl_ms=2 * HOUR)], [])
    assert check_run(history, ([], [opened(3, HOUR)])) == 0  # it takes the buffered message


def test_a_late_record_before_the_stored_cluster_replays_the_whole_history():
    history = ([message(1, 0, ttl_ms=HOUR), message(2, 4 * HOUR, ttl_ms=0)], [])
    assert check_run(history, ([], [opened(3, HOUR // 2)])) is None


def test_an_element_left_long_ago_is_remembered_by_the_open_that_names_it():
    history = ([message(2, 4 * HOUR, ttl_ms=0, key="other")],
               [event(1, "ELEMENT_LEFT", 0, element_instance_key="e1")])
    assert cluster_of(*history) == (4 * HOUR, 4 * HOUR)
    # rule 11: the open opens nothing; a replay from 4 h without the leaving would open it
    assert check_run(history, ([message(4, 6 * HOUR)], [opened(3, 5 * HOUR, element="e1")])) is None


def test_a_start_event_lock_held_across_runs_keeps_its_instance_in_the_cluster():
    history = ([message(2, HOUR), message(3, 5 * HOUR, ttl_ms=3 * HOUR)], [deployed(1, 0, process="S")])
    assert cluster_of(*history) == (HOUR, None)  # the instance of message 2 runs: the lock is held
    end = event(4, "INSTANCE_ENDED", 7 * HOUR, process_instance_key="msg-start:S:2")
    assert check_run(history, ([], [end])) == HOUR  # its end starts message 3's instance (rule 21)


def test_an_end_held_before_its_instance_starts_joins_the_start():
    end = event(2, "INSTANCE_ENDED", HOUR, process_instance_key="msg-start:S:5")
    # the message that starts the instance comes later; its end, held (rule 20a), names it
    assert check_run(([], [deployed(1, 0, process="S"), end]), ([message(5, 3 * HOUR)], [])) == HOUR
    history = ([message(6, 2 * HOUR, ttl_ms=0, key="other", name="b")], [deployed(1, 0, process="S"), end])
    assert cluster_of(*history) == (2 * HOUR, 2 * HOUR)
    assert check_run(history, ([message(5, 3 * HOUR)], [])) is None


def stretched(case: dict) -> dict:
    """The case's times spread 600 times as far (500 ms apart become 5 min), as int millis."""
    def spread(r: dict, field: str) -> dict:
        return dict(r, **{field: BASE_MS + (millis(r[field]) - BASE_MS) * 600})
    return {"messages": [spread(m, "published_at") for m in case["messages"]],
            "workflow_events": [spread(e, "timestamp") for e in case["workflow_events"]]}


@seed(SEED)
@settings(max_examples=400, deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))
@given(st.one_of(streams(), streams(profile=START_EVENTS)).map(stretched), st.data())
def test_a_run_from_its_quiet_point_restates_what_the_whole_history_would(case, data):
    note(f"CORRELAKE_TEST_SEED={SEED}")
    first = {(s, r["position"]): r for s in ("messages", "workflow_events") for r in case[s]}  # no replays
    new = data.draw(st.sets(st.sampled_from(sorted(first)), max_size=len(first)) if first else st.just(set()))
    part = {True: ([], []), False: ([], [])}
    for (stream, position), r in first.items():
        part[(stream, position) in new][stream == "workflow_events"].append(r)
    check_run(part[False], part[True])
