"""The report's "Why not correlated" card: its near misses told in words."""

from __future__ import annotations

from correlake.interfaces.commands import report_page


def near(miss: str, **values) -> dict:
    return {"miss": miss, "kind": "MESSAGE", "other_kind": "SUBSCRIPTION", "name": "Money collected",
            "key_shape": "ORDER-…", "other_name": "Money collected", "other_key_shape": "order-…",
            "tenant_id": None, "other_tenant_id": None, "n": 38, **values}


def test_near_misses_in_words():
    assert report_page._near_miss(near("KEY_CASE_OR_SPACE")) == (
        "38 messages of “Money collected” used the key “ORDER-…” where subscriptions used “order-…”")
    assert report_page._near_miss(near("NAME_CASE_OR_SPACE", n=1, name="money collected", key_shape="order-…")) == (
        "1 message named “money collected” where subscriptions used “Money collected” (key “order-…”)")
    assert report_page._near_miss(near("OTHER_TENANT", kind="SUBSCRIPTION", other_kind="MESSAGE", n=2,
                                       tenant_id="eu", other_tenant_id="us", key_shape="order-…")) == (
        "2 subscriptions of “Money collected” (key “order-…”) in tenant eu where messages are in tenant us")


def test_the_card_without_anything_unexplained_says_so():
    data = {"unmatched_reasons": [], "unmatched_reasons_per_hour": [], "top_near_misses": []}
    assert "every message and subscription took part in a correlation" in report_page._why(data)
    data = {"unmatched_reasons": [{"label": "MESSAGE · NO_SUBSCRIPTION", "n": 3}],
            "unmatched_reasons_per_hour": [{"hour": "2026-01-01 10:00", "reason": "NO_SUBSCRIPTION", "n": 3}],
            "top_near_misses": [near("KEY_CASE_OR_SPACE")]}
    card = report_page._why(data)
    assert card.count("<svg") == 2 and "38 messages of" in card and "<table" in card
