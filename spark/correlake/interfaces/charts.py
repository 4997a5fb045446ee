"""Small static SVG charts for the HTML report: no script, no network.

Every drawn data mark has class `mark` and a `<title>` (its tooltip); a chart with
no data says so instead of drawing an empty frame.
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2")
FONT = 'font-family="system-ui, sans-serif" font-size="11" fill="#333"'
WIDTH, HEIGHT = 520, 240
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 28, 40  # plot margins of the column and line charts


def number(value: float) -> str:
    """A count with thousands separators, other values with 3 significant digits."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3g}"


def _layout(categories: list[str], series: dict[str, list[float]]) -> tuple[float, list[float], float, float]:
    """The y scale's top and ticks, the plot's height and each category's width."""
    top, ticks = _scale(max(max(v) for v in series.values()))
    return top, ticks, HEIGHT - TOP - BOTTOM, (WIDTH - LEFT - RIGHT) / len(categories)


def skewed(series: dict[str, list[float]], ratio: float = 20.0) -> bool:
    """Whether a linear scale would flatten the small values: the largest over `ratio` times
    the smallest that is not zero."""
    values = [v for vs in series.values() for v in vs if v > 0]
    return bool(values) and max(values) > ratio * min(values)


def columns(categories: list[str], series: dict[str, list[float]], log: bool = False) -> str:
    """Grouped vertical bars: one group per category, one bar per series; `log`: a log
    scale (1, 10, 100 …), so that a bucket of thousands leaves the buckets of a few visible."""
    if not categories or not any(any(v) for v in series.values()):
        return _no_data()
    top, ticks, plot_h, slot = _layout(categories, series)
    if log:
        top = 10 ** math.ceil(math.log10(max(max(v) for v in series.values())) or 1)
        ticks = [10 ** e for e in range(round(math.log10(top)) + 1)]
    height = (lambda v: plot_h * math.log10(1 + v) / math.log10(1 + top)) if log else (lambda v: plot_h * v / top)
    bar = max(1.0, slot * 0.8 / len(series))
    marks = []
    for s, (name, values) in enumerate(series.items()):
        for i, value in enumerate(values):
            h = height(value)
            x = LEFT + i * slot + slot * 0.1 + s * bar
            marks.append(f'<rect class="mark" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar:.1f}" '
                         f'height="{h:.1f}" fill="{PALETTE[s % len(PALETTE)]}"><title>{escape(categories[i])} · '
                         f'{escape(name)}: {number(value)}</title></rect>')
    return _frame(_y_axis(top, ticks, log) + _x_labels(categories, slot) + "".join(marks) + _legend(series))


def lines(categories: list[str], series: dict[str, list[float]]) -> str:
    """One line per series over evenly spaced categories (e.g. hours), with a dot per point."""
    if not categories or not any(any(v) for v in series.values()):
        return _no_data()
    top, ticks, plot_h, slot = _layout(categories, series)
    marks = []
    for s, (name, values) in enumerate(series.items()):
        color = PALETTE[s % len(PALETTE)]
        points = [(LEFT + (i + 0.5) * slot, TOP + plot_h - plot_h * v / top) for i, v in enumerate(values)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        marks.append(f'<polyline class="mark" points="{path}" fill="none" stroke="{color}" stroke-width="2">'
                     f'<title>{escape(name)}</title></polyline>')
        marks += [f'<circle class="mark" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>'
                  f'{escape(categories[i])} · {escape(name)}: {number(values[i])}</title></circle>'
                  for i, (x, y) in enumerate(points)]
    return _frame(_y_axis(top, ticks) + _x_labels(categories, slot) + "".join(marks) + _legend(series))


def bars(labels: list[str], values: list[float], *, color: str = PALETTE[0]) -> str:
    """Horizontal bars, one per label, largest first as given: each label on its own line
    above its bar (whole, up to the chart's width), the value at the bar's end."""
    if not labels:
        return _no_data()
    row, char_w = 34, 6.2  # a label's line and its bar; about 6.2 px a character
    most = int((WIDTH - 8) / char_w)
    height = 8 + row * len(labels)
    top = max(values) or 1
    plot_w = WIDTH - 60
    parts = []
    for i, (label, value) in enumerate(zip(labels, values)):
        y = 8 + i * row
        w = max(1.0, plot_w * value / top)
        short = label if len(label) <= most else label[:most - 1] + "…"
        parts.append(f'<text x="4" y="{y + 11}" {FONT}>{escape(short)}<title>{escape(label)}</title></text>'
                     f'<rect class="mark" x="4" y="{y + 15}" width="{w:.1f}" height="{row - 20}" '
                     f'fill="{color}"><title>{escape(label)}: {number(value)}</title></rect>'
                     f'<text x="{w + 8:.1f}" y="{y + 25}" {FONT}>{number(value)}</text>')
    return _frame("".join(parts), height)


def _scale(peak: float) -> tuple[float, list[float]]:
    """A round axis maximum at or above `peak` and its ticks (4 to 6 steps)."""
    peak = max(peak, 1e-9)
    raw = peak / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    top = step * math.ceil(peak / step)
    return top, [i * step for i in range(round(top / step) + 1)]


def _y_axis(top: float, ticks: list[float], log: bool = False) -> str:
    plot_h = HEIGHT - TOP - BOTTOM
    out = []
    for tick in ticks:
        y = TOP + plot_h - plot_h * (math.log10(1 + tick) / math.log10(1 + top) if log else tick / top)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{number(tick)}</text>')
    return "".join(out) + (f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" '
                           'stroke="#999"/>')


def _x_labels(categories: list[str], slot: float) -> str:
    every = max(1, math.ceil(len(categories) * 64 / (WIDTH - LEFT - RIGHT)))  # about 64 px per label
    y = HEIGHT - BOTTOM + 16
    return "".join(f'<text x="{LEFT + (i + 0.5) * slot:.1f}" y="{y}" text-anchor="middle" {FONT}>'
                   f'{escape(c)}</text>' for i, c in enumerate(categories) if i % every == 0)


def _legend(series: dict) -> str:
    if len(series) < 2:
        return ""
    out, x = [], LEFT
    for s, name in enumerate(series):
        out.append(f'<rect x="{x}" y="8" width="10" height="10" fill="{PALETTE[s % len(PALETTE)]}"/>'
                   f'<text x="{x + 14}" y="17" {FONT}>{escape(name)}</text>')
        x += 24 + 7 * len(name)
    return "".join(out)


def _frame(body: str, height: int = HEIGHT) -> str:
    return (f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" role="img">{body}</svg>')


def _no_data() -> str:
    return '<p class="no-data">no data</p>'
