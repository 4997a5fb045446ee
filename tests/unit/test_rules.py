"""One focused test per rule of semantics.md, on the engine (pure Python, no Spark).

The Spark path runs the same engine; test_conformance and test_property_pipeline
prove the pipeline around it, and the rules that need it: arrival-order invariance
(rule 4: shuffled split runs) and statuses at as_of (rule 23); exact replays (rule 8),
which bronze and silver collapse before the engine, in test_pipeline_cases.
"""

from __future__ import annotations

from support.helpers import parsed
from support.records import S, deploy, ended, left, msg, sub
from test_engine_model import engine_gold


def run(messages=(), events=()):
    g = engine_gold(parsed("messages", list(messages)), parsed("workflow_events", list(events)))
    g["pairs"] = sorted((c["message_key"], c["element_instance_key"] or c["process_instance_key"], c["correlated_at"])
                        for c in g["correlations"])
    g["subs"] = {(s["element_instance_key"], s["message_name"]): (s["closed_at"], s["close_reason"],
                                                                  s["correlation_count"]) for s in g["subscriptions"]}
    return g


# 1. Time and order ---------------------------------------------------------------------
def test_r2_workflow_events_come_first_at_the_same_millisecond():
    g = run([msg(2, 5, ttl=0)], [sub(9, 5, "e")])
    assert g["pairs"] == [(2, "e", 5 * S)]  # the open at 5s sees the TTL-0 message published at 5s


def test_r2_position_breaks_ties_between_messages():
    g = run([msg(7, 1), msg(3, 1)], [sub(9, 2, "e")])
    assert g["pairs"] == [(3, "e", 2 * S)]


def test_r3_a_group_opens_together_and_pulls_in_position_order():
    g = run([msg(1, 0, name="b"), msg(2, 0, name="a")],
            [sub(5, 1, "gw", name="a", etype="EVENT_BASED_GATEWAY"), sub(4, 1, "gw", name="b", etype="EVENT_BASED_GATEWAY")])
    assert g["pairs"] == [(1, "gw", 1 * S)]  # member 4 (name b) pulls first, closes member 5
    assert g["subs"][("gw", "a")] == (1 * S, "SIBLING_CORRELATED", 0)


def test_r3_records_between_members_come_after_the_group():
    # the ELEMENT_LEFT at position 5 is between members 4 and 6: the group is opened first
    g = run([], [sub(4, 1, "e", name="a"), left(5, 1, "e"), sub(6, 1, "e", name="b")])
    assert g["subs"][("e", "b")] == (1 * S, "ELEMENT_LEFT", 0)


def test_r3a_workflow_events_act_on_their_own_tenant_only():
    g = run([msg(1, 2, tenant="A")], [sub(2, 0, "e", tenant="A"), left(3, 1, "e")])  # left: default tenant
    assert g["pairs"] == [(1, "e", 2 * S)]


# 2. Messages --------------------------------------------------------------------------
def test_r5_match_on_name_and_key_never_across_tenants():
    g = run([msg(1, 1, key="other"), msg(2, 1, name="x"), msg(3, 1, tenant="B"), msg(4, 1)], [sub(9, 0, "e")])
    assert g["pairs"] == [(4, "e", 1 * S)]


def test_r6_deadline_is_exclusive():
    g = run([msg(1, 0, ttl=5 * S)], [sub(2, 5, "e")])
    assert g["pairs"] == []
    g = run([msg(1, 0, ttl=5 * S + 1)], [sub(2, 5, "e")])
    assert g["pairs"] == [(1, "e", 5 * S)]


def test_r6_ttl_zero_is_offered_only_at_its_publish_instant():
    g = run([msg(1, 0, ttl=0)], [sub(2, 0, "e1"), sub(3, 1, "e2")])
    assert g["pairs"] == [(1, "e1", 0)]


def test_r7_duplicate_id_rejected_while_buffered_and_accepted_after_the_deadline():
    g = run([msg(1, 0, ttl=10 * S, mid="x"), msg(2, 5, mid="x"), msg(3, 10, mid="x"), msg(4, 11, mid="x")])
    assert g["duplicate_of"] == {1: None, 2: 1, 3: None, 4: 3}


def test_r7_rejected_duplicates_do_not_correlate_and_ttl_zero_does_not_block():
    g = run([msg(1, 0, ttl=0, mid="x"), msg(2, 1, mid="x"), msg(3, 2, mid="x")], [sub(9, 3, "e")])
    assert g["duplicate_of"] == {1: None, 2: None, 3: 2}
    assert g["pairs"] == [(2, "e", 3 * S)]


def test_r8_exact_replay_is_the_same_record():
    """The engine's side only: `parsed` passes it one record per position, as silver does.
    That bronze and silver collapse a replay is test_pipeline_cases' `test_r8_…`."""
    g = run([msg(1, 0), msg(1, 0)], [sub(2, 1, "e1"), sub(3, 2, "e2")])
    assert g["pairs"] == [(1, "e1", 1 * S)]


def test_r9_a_correlated_message_stays_available_to_other_processes():
    g = run([msg(1, 0)], [sub(2, 1, "e1", process="p"), sub(3, 2, "e2", process="q")])
    assert g["pairs"] == [(1, "e1", 1 * S), (1, "e2", 2 * S)]


# 3. Subscriptions -----------------------------------------------------------------------
def test_r10_key_is_fixed_at_opening():
    g = run([msg(1, 1, key="k2")], [sub(2, 0, "e", key="k1"), sub(3, 0, "e", key="k2")])  # 2nd open ignored
    assert g["pairs"] == [] and list(g["subs"]) == [("e", "m")]


def test_r11_left_and_ended_close_and_later_opens_open_nothing():
    g = run([], [sub(1, 0, "e", pik="i"), left(2, 1, "e"), sub(3, 2, "e", name="other"),
                 sub(4, 0, "f", pik="j"), ended(5, 1, "j"), sub(6, 2, "g", pik="j")])
    assert g["subs"] == {("e", "m"): (1 * S, "ELEMENT_LEFT", 0), ("f", "m"): (1 * S, "INSTANCE_ENDED", 0)}


def test_r12_non_interrupting_takes_every_message_one_each():
    g = run([msg(1, 0), msg(2, 1), msg(3, 5)], [sub(9, 2, "b", etype="BOUNDARY_EVENT", interrupting=False)])
    assert g["pairs"] == [(1, "b", 2 * S), (2, "b", 2 * S), (3, "b", 5 * S)]
    assert g["subs"][("b", "m")] == (None, None, 3)


def test_r13_interrupting_correlation_leaves_the_owner():
    g = run([msg(1, 1, name="pay")], [sub(2, 0, "task", name="pay", etype="RECEIVE_TASK"),
                                      sub(3, 0, "task", name="cancel", etype="BOUNDARY_EVENT"),
                                      sub(4, 2, "task", name="late", etype="BOUNDARY_EVENT")])
    assert g["subs"] == {("task", "pay"): (1 * S, "CORRELATED", 1),
                         ("task", "cancel"): (1 * S, "SIBLING_CORRELATED", 0)}


def test_r13_event_subprocess_closes_only_event_subprocess_siblings():
    g = run([msg(1, 1, name="a")], [sub(2, 0, "scope", name="a", etype="EVENT_SUBPROCESS"),
                                    sub(3, 0, "scope", name="b", etype="EVENT_SUBPROCESS"),
                                    sub(4, 0, "scope", name="c", etype="BOUNDARY_EVENT")])
    assert g["subs"] == {("scope", "a"): (1 * S, "CORRELATED", 1), ("scope", "b"): (1 * S, "SIBLING_CORRELATED", 0),
                         ("scope", "c"): (None, None, 0)}


def test_r17_first_opened_is_ranked_by_its_own_position_also_in_a_group():
    """A reading (README: Where the spec leaves room): X's group opens at its lowest
    position (1), yet X/a ranks by its own position (3), after Y/a (2)."""
    g = run([msg(4, 2, name="a")], [sub(1, 1, "X", name="b", pik="i1"), sub(3, 1, "X", name="a", pik="i1"),
                                    sub(2, 1, "Y", name="a", pik="i2")])
    assert g["pairs"] == [(4, "Y", 2 * S)]
    assert g["subs"][("X", "a")] == g["subs"][("X", "b")] == (None, None, 0)


def test_r14_pull_takes_the_first_published_fifo():
    g = run([msg(2, 1), msg(1, 0), msg(3, 2)], [sub(9, 3, "e")])
    assert g["pairs"] == [(1, "e", 3 * S)]


# 4. Cardinality ---------------------------------------------------------------------------
def test_r15_at_most_once_per_process_across_versions_and_types():
    g = run([msg(1, 0)], [sub(2, 1, "e1", version=1), sub(3, 2, "e2", version=2, etype="RECEIVE_TASK"),
                          deploy(4, 0, starts=["m"])])
    assert g["pairs"] == [(1, "msg-start:p:1", 0)]  # the start took it; no catch of p may take it again


def test_r16_every_process_with_an_open_subscription_gets_it():
    g = run([msg(1, 1)], [sub(2, 0, "e1", process="p"), sub(3, 0, "e2", process="q"), sub(4, 0, "e3", process="p")])
    assert g["pairs"] == [(1, "e1", 1 * S), (1, "e2", 1 * S)]


def test_r17_publish_goes_to_the_first_opened_subscription_per_process():
    g = run([msg(1, 5)], [sub(3, 2, "late"), sub(2, 1, "early")])
    assert g["pairs"] == [(1, "early", 5 * S)]


# 5. Message start events ----------------------------------------------------------------
def test_r18_last_deployment_counts_and_does_not_pick_up_buffered():
    g = run([msg(1, 0), msg(2, 5)], [deploy(3, 1, version=1, starts=["m"]), deploy(4, 2, version=2, starts=[])])
    assert g["pairs"] == []
    g = run([msg(1, 0), msg(2, 5)], [deploy(3, 1, version=1, starts=[]), deploy(4, 2, version=3, starts=["m"])])
    assert g["pairs"] == [(2, "msg-start:p:2", 5 * S)]
    assert g["message_started_instances"][0]["process_version"] == 3


def test_r19_lock_per_process_and_key_and_catch_beats_start():
    g = run([msg(1, 1), msg(2, 2), msg(3, 3, key="other")], [deploy(4, 0)])
    assert [p for _, p, _ in g["pairs"]] == ["msg-start:p:1", "msg-start:p:3"]
    g = run([msg(1, 1)], [deploy(4, 0), sub(5, 0, "e")])
    assert g["pairs"] == [(1, "e", 1 * S)]


def test_r20_empty_key_never_locks_but_is_ordinary_for_catch():
    g = run([msg(1, 1, key=""), msg(2, 2, key="")], [deploy(4, 0)])
    assert len(g["message_started_instances"]) == 2
    g = run([msg(1, 1, key="")], [sub(2, 0, "e", key="")])
    assert g["pairs"] == [(1, "e", 1 * S)]


def test_r20a_first_end_counts_and_an_early_end_is_held_until_start():
    g = run([msg(1, 5)], [deploy(2, 0), ended(3, 1, "msg-start:p:1"), ended(4, 9, "msg-start:p:1")])
    inst = g["message_started_instances"][0]
    assert inst["started_at"] == inst["ended_at"] == 5 * S


def test_r20a_a_held_end_does_nothing_until_its_instance_starts():
    """A reading (README: Where the spec leaves room): until the message starts the
    instance, a subscription opened in it takes messages; the start's held end closes it."""
    g = run([msg(4, 2, name="b"), msg(5, 3, name="a")],
            [deploy(1, 0, starts=["a"]), ended(3, 2, "msg-start:p:5"),
             sub(2, 1, "s", name="b", pik="msg-start:p:5", etype="BOUNDARY_EVENT", interrupting=False)])
    assert g["pairs"] == [(4, "s", 2 * S), (5, "msg-start:p:5", 3 * S)]
    assert g["subs"][("s", "b")] == (3 * S, "INSTANCE_ENDED", 1)
    inst = g["message_started_instances"][0]
    assert inst["started_at"] == inst["ended_at"] == 3 * S


def test_r21_release_starts_the_oldest_buffered_candidate_across_start_events():
    g = run([msg(1, 1, name="a"), msg(2, 2, name="b"), msg(3, 3, name="a")],
            [deploy(4, 0, starts=["a", "b"]), ended(5, 6, "msg-start:p:1")])
    assert [(k, t) for k, _, t in g["pairs"]] == [(1, 1 * S), (2, 6 * S)]


# 6. Outcomes -----------------------------------------------------------------------------
def test_r22_correlation_carries_time_and_variables():
    messages = [dict(msg(1, 0), variables={"amount": 5})]
    g = run(messages, [sub(2, 3, "e")])
    assert g["correlations"][0]["correlated_at"] == 3 * S and g["correlations"][0]["variables"] == '{"amount":5}'
