"""The report's charts say what their data say: whole labels, a log scale where one bucket
would flatten the others, and no bars of one length where nothing stands out."""

from __future__ import annotations

import re

from correlake.interfaces import charts
from correlake.interfaces.commands import report_page


def test_a_long_label_is_drawn_whole_above_its_bar():
    label = "order-fulfilment-process · payment-received · SIBLING_CORRELATED"
    svg = charts.bars([label, "short"], [3, 1])
    assert f">{label}<title>" in svg and "…" not in svg


def test_a_skewed_histogram_is_drawn_on_a_log_scale_where_a_bucket_of_one_shows():
    series = {"since published": [1450, 3, 1, 0]}
    assert charts.skewed(series) and not charts.skewed({"a": [10, 5, 1]})
    heights = lambda svg: [float(h) for h in re.findall(r'class="mark"[^>]*height="([\d.]+)"', svg)]  # noqa: E731
    linear, log = heights(charts.columns(list("abcd"), series)), heights(charts.columns(list("abcd"), series, log=True))
    assert linear[2] < 0.2 and log[2] > 10  # the bucket of 1: a sliver, then a bar
    assert log[0] > log[1] > log[2] > log[3] == 0
    assert ">1,000<" in charts.columns(list("abcd"), series, log=True)  # ticks 1, 10, 100, 1,000, 10,000
    page = report_page._latency([{"measure": "since published", "label": label, "n": n}
                                 for label, n in zip("abcd", series["since published"])])
    assert "Log scale" in page


def test_keys_that_all_have_as_many_unmatched_messages_get_a_sentence_not_bars():
    same = [{"label": f"<default> · order-{i}: payment", "n": 2} for i in range(10)]
    text = report_page._keys(same)
    assert "No key stands out: each of the 10 keys listed" in text and "<svg" not in text
    assert "order-9" in text
    assert "<svg" in report_page._keys([{"label": "a", "n": 5}, {"label": "b", "n": 2}])
