"""The HTML page of `correlake report`: its data (`report_data.gather`, the rows of the queries
of `sql/report/`, by file name) as cards of inline SVG charts (`charts.py`) and tables."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from html import escape

from correlake.analysis.audit import SIDES, target
from correlake.config import absolute, data_docs_dir, default_max_quarantine_ratio, expectations_dir
from correlake.interfaces import charts


def page(data: dict[str, list[dict]], lake: str) -> str:
    """The HTML page of the report's data (`report_data.gather`)."""
    totals = {}
    for row in data["headline_counts"]:
        totals.setdefault(row["what"], {})[row["kind"]] = row["n"]
    as_of = next(iter(totals.get("as_of", {})), "-")
    sections = [
        _card("Activity per hour", "Messages published, correlations made and messages that expired unmatched "
              "(view hourly_activity).", _hourly(data["activity_per_hour"])),
        _card("Correlation latency", "Time from publishing, and from the subscription opening, to the "
              "correlation (view correlation_latency).", _latency(data["latency_histogram"])),
        _card("Latency percentiles", "The busiest process · message · subscription type pairs "
              "(view latency_percentiles).", _percentiles(data["busiest_latency_percentiles"]), wide=True),
        _card("Buffered backlog", "Messages in the buffer at the end of each hour, and those of them not "
              "correlated yet (view buffered_backlog).", _backlog(data["backlog_per_hour"])),
        _card("Unmatched messages by name", "Expired without a correlation; → the processes listening to the "
              "name (view unmatched_messages).", _bars(data["unmatched_by_name"], charts.PALETTE[2])),
        _card("Unmatched messages by key", "Tenant · correlation key: names (view unmatched_messages).",
              _keys(data["unmatched_by_key"])),
        _card("Why not correlated", "Each message and subscription that took part in no correlation, by its first "
              "reason (view explanations; `correlake explain` tells one's story), per hour, and the commonest near "
              "misses (view near_misses).", _why(data), wide=True),
        _card("Start-event lock waits", "Messages that arrived while an instance started by the same key was "
              "active, by how the wait ended (view start_lock_waits).", _lock_waits(data["lock_wait_outcomes"])),
        _card("Subscriptions closed without a message", "Process · message · close reason "
              "(view subscriptions_closed_without_message).", _bars(data["closed_without_message"], charts.PALETTE[4])),
        _card("Duplicate rejections", "Names whose messages carry an id: how many were rejected as duplicates "
              "(view duplicate_rejections).", _duplicates(data["duplicate_rejection_rates"])),
        _card("Quarantine reasons", "Input lines that were not ingested, by reason (table quarantine).",
              _bars(data["quarantine_reasons"], charts.PALETTE[1])),
        _delivery(data),
        _engine(data),
    ]
    return PAGE.format(
        title=escape(f"correlake report — {lake}"), lake=escape(absolute(lake)), as_of=escape(as_of),
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), kpis=_kpis(totals),
        sections="".join(sections), runs=_runs(data["recent_runs"], lake))


def _card(title: str, about: str, body: str, wide: bool = False) -> str:
    return (f'<section class="card{" wide" if wide else ""}"><h2>{escape(title)}</h2>'
            f'<p class="about">{escape(about)}</p>{body}</section>')


def _kpis(totals: dict) -> str:
    def tile(label, value, detail):
        return (f'<div class="kpi"><b>{charts.number(value)}</b><span>{escape(label)}</span>'
                f'<small>{escape(detail)}</small></div>')

    def parts(group):
        return ", ".join(f"{k.lower().replace('_', ' ')} {charts.number(v)}" for k, v in sorted(group.items()))

    m, c, s, i = (totals.get(k, {}) for k in ("messages", "correlations", "subscriptions", "instances"))
    return "".join([
        tile("messages", sum(m.values()), parts(m)),
        tile("correlations", sum(c.values()), parts(c)),
        tile("open subscriptions", s.get("open", 0), f"of {charts.number(sum(s.values()))} opened"),
        tile("active message-started instances", i.get("active", 0), f"of {charts.number(sum(i.values()))} started"),
        tile("quarantined lines", totals.get("quarantined", {}).get("records", 0), "not ingested"),
    ])


def _hour_labels(labels: list[str]) -> list[str]:
    """'HH:mm' when every hour is on one day, else 'MM-dd HH:mm'."""
    one_day = len({label[:10] for label in labels}) <= 1
    return [label[11:] if one_day else label[5:] for label in labels]


def _hourly(rows: list[dict]) -> str:
    return charts.columns(_hour_labels([r["hour"] for r in rows]), {
        "published": [r["published"] for r in rows],
        "correlations": [r["correlations"] for r in rows],
        "expired unmatched": [r["expired"] for r in rows],
    })


def _latency(rows: list[dict]) -> str:
    """Rows of every measure and bucket, in order (`sql/report/latency_histogram.sql`); on a
    log scale when a linear one would flatten the small buckets."""
    series = {}
    for r in rows:
        series.setdefault(r["measure"], []).append(r["n"])
    log = charts.skewed(series)
    chart = charts.columns(list(dict.fromkeys(r["label"] for r in rows)), series, log=log)
    return chart + ('<p class="about">Log scale (1, 10, 100 …): the buckets differ by more than 20 times; '
                    "hover a bar for its count.</p>" if log else "")


def _keys(rows: list[dict]) -> str:
    """The keys with the most unmatched messages; when they all have as many, a sentence
    and a list say so (bars of one length would show nothing)."""
    if len(rows) > 1 and len({r["n"] for r in rows}) == 1:
        return (f'<p>No key stands out: each of the {len(rows)} keys listed (the first by name) has '
                f'{charts.number(rows[0]["n"])} unmatched messages.</p>'
                + _table(["tenant · correlation key: names", "unmatched"], [[r["label"], r["n"]] for r in rows]))
    return _bars(rows, charts.PALETTE[2])


def _backlog(rows: list[dict]) -> str:
    return charts.lines(_hour_labels([r["label"] for r in rows]), {
        "buffered": [r["buffered"] for r in rows],
        "not correlated yet": [r["uncorrelated"] for r in rows],
    })


def _bars(rows: list[dict], color: str) -> str:
    return charts.bars([r["label"] for r in rows], [r["n"] for r in rows], color=color)


def _why(data: dict[str, list[dict]]) -> str:
    """The reasons (bars), the commonest per hour (columns), the commonest near misses
    (sentences and a table)."""
    reasons = data["unmatched_reasons"]
    if not reasons:
        return '<p class="no-data">every message and subscription took part in a correlation</p>'
    per_hour: dict[str, dict[str, int]] = {}
    for r in data["unmatched_reasons_per_hour"]:
        per_hour.setdefault(r["reason"], {})[r["hour"]] = r["n"]
    hours = list(dict.fromkeys(r["hour"] for r in data["unmatched_reasons_per_hour"]))
    top = sorted(per_hour, key=lambda reason: -sum(per_hour[reason].values()))[:5]
    series = {reason: [per_hour[reason].get(h, 0) for h in hours] for reason in top}
    misses = data["top_near_misses"]
    near = ("<h3>Near misses</h3>" + "<ul>" + "".join(f"<li>{escape(_near_miss(r))}</li>" for r in misses) + "</ul>"
            + _table(["miss", "objects", "name", "key", "their other side", "its key"],
                     [[r["miss"], r["n"], r["name"], r["key_shape"], r["other_name"], r["other_key_shape"]]
                      for r in misses])
            if misses else '<p class="about">No near miss: no unexplained key or name differs from a waiting '
                           "one only in case, white space or tenant.</p>")
    return (_bars(reasons, charts.PALETTE[2]) + "<h3>Per hour, the commonest reasons</h3>"
            + charts.columns(_hour_labels(hours), series) + near)


def _near_miss(r: dict) -> str:
    """A near miss of the report's table in words: who used what, where the other side used what."""
    def who(kind: str, n: int) -> str:
        return f"{n} {kind.lower()}{'s' if n != 1 else ''}" if n else f"{kind.lower()}s"

    mine, theirs = who(r["kind"], r["n"]), who(r["other_kind"], 0)
    if r["miss"] == "KEY_CASE_OR_SPACE":
        return f"{mine} of “{r['name']}” used the key “{r['key_shape']}” where {theirs} used “{r['other_key_shape']}”"
    if r["miss"] == "NAME_CASE_OR_SPACE":
        return f"{mine} named “{r['name']}” where {theirs} used “{r['other_name']}” (key “{r['key_shape']}”)"
    return (f"{mine} of “{r['name']}” (key “{r['key_shape']}”) in tenant {r['tenant_id']} where {theirs} are in "
            f"tenant {r['other_tenant_id']}")


def _lock_waits(rows: list[dict]) -> str:
    if not rows:
        return '<p class="no-data">no message waited for the lock</p>'
    chart = charts.bars([r["outcome"] for r in rows], [r["n"] for r in rows], color=charts.PALETTE[3])
    return chart + _table(["outcome", "messages", "median wait", "longest wait"],
                          [[r["outcome"], r["n"], _duration(r["median_s"]), _duration(r["max_s"])] for r in rows])


def _percentiles(rows: list[dict]) -> str:
    def spread(r, measure):
        values = [r[f"since_{measure}_{p}_s"] for p in ("p50", "p90", "p99")]
        return " · ".join(map(_duration, values)) if values[0] is not None else "–"

    return _table(["process", "message", "type", "correlations", "since published: p50 · p90 · p99",
                   "since the subscription opened: p50 · p90 · p99"],
                  [[r["bpmn_process_id"], r["message_name"], r["subscription_type"], r["correlations"],
                    spread(r, "published"), spread(r, "opened")] for r in rows])


def _duplicates(rows: list[dict]) -> str:
    return _table(["tenant", "name", "messages", "with id", "rejected", "rate"],
                  [[r["tenant_id"], r["name"], r["messages"], r["with_message_id"], r["rejected"],
                    f"{r['rejection_rate']:.1%}"] for r in rows])


def _runs(rows: list[dict], lake: str) -> str:
    """The last run that read records, its gates (from its summary and the suites), and the
    runs before it (status refreshes included: runs of no files)."""
    summaries = [json.loads(r["summary"] or "{}") for r in rows]
    read = [(r, s) for r, s in zip(rows, summaries) if s.get("as_of_before") is None]
    if not read:
        return "<p>no run recorded</p>"
    last, summary = read[0]
    timings = summary.get("timings", {})
    ratio = last["quarantined"] / max(last["records_read"], 1)
    limit = summary.get("max_quarantine_ratio")
    limit = (f"at most {limit:.2%} allowed" if limit is not None else
             f"the limit of that run was not recorded (runs record it since 2026-12-03; today's default "
             f"is {default_max_quarantine_ratio():.0%})")
    gates = [["quarantine ratio", f"{charts.number(last['quarantined'])} of {charts.number(last['records_read'])} "
              f"lines quarantined ({ratio:.2%}); {limit}", "passed", ""]]
    suites = _suites()
    for key, seconds in timings.items():
        if key.startswith("gate:"):
            gate = key.removeprefix("gate:")
            checks = ", ".join(f"{name} ({n} expectations)" for name, n in suites.items()
                               if name == gate or name.startswith(gate + "_"))
            gates.append([gate, checks, "passed", f"{seconds:.1f} s"])
    docs = data_docs_dir(lake) / "index.html"
    docs_link = f' Validation details: <a href="{docs.as_uri()}">Data Docs</a>.' if docs.exists() else ""
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    return (
        f"<p>Run <code>{escape(last['run_id'])}</code>: started {escape(last['started'])}, finished "
        f"{escape(last['finished'])} UTC; {charts.number(last['files'])} files, "
        f"{charts.number(last['records_read'])} lines read, {charts.number(summary.get('replays', 0))} replays, "
        f"{charts.number(summary.get('touched_groups', 0))} key groups recomputed; as_of {escape(last['as_of'])}."
        f"<br>Stages: {escape(stages)}.</p>"
        + _table(["gate", "checks", "result", "time"], gates)
        + '<p class="about">A run is recorded only once every gate has passed, so each recorded run passed '
          "them all; the run's summary keeps the gates' times, not their observed values, and a failed run "
          f"leaves no row.{docs_link}</p>"
        + "<h3>Recent runs</h3>"
        + ('<p class="about">A run of 0 files re-evaluated the statuses only: nothing was new, as_of moved.</p>'
           if any(r["files"] == 0 for r in rows) else "")
        + _table(["run", "finished", "files", "lines read", "quarantined", "as_of"],
                 [[r["run_id"], r["finished"], r["files"], r["records_read"], r["quarantined"], r["as_of"]]
                  for r in rows]))


def _delivery(data: dict[str, list[dict]]) -> str:
    about = "Events sent by `correlake deliver`, by status; from correlation to acknowledgement; dead letters."
    if "delivery_statuses" not in data:
        return _card("Delivery", about, '<p class="no-data">no delivery pass has run on this lake</p>', wide=True)
    latency = [[r["bpmn_process_id"], r["kind"], r["acked"], _duration(r["p50_s"]), _duration(r["p90_s"]),
                _duration(r["p99_s"]), _duration(r["max_s"])] for r in data["busiest_delivery_latency"]]
    body = (_bars(data["delivery_statuses"], charts.PALETTE[0])
            + _table(["process", "kind", "acknowledged", "p50", "p90", "p99", "max"], latency)
            + "<h3>Dead letters (view dead_letters)</h3>"
            + (_bars(data["dead_letter_reasons"], charts.PALETTE[1]) if data["dead_letter_reasons"] else "<p>none</p>"))
    return _card("Delivery", about + " (views delivery_events, delivery_latency, dead_letters)", body, wide=True)


def _engine(data: dict[str, list[dict]]) -> str:
    """The card "The engine and correlake", for a lake of exporter records only (`analysis/audit.py`)."""
    if "engine_difference_counts" not in data:
        return ""
    counts = [[r["difference"], r["explanation"] or "–", r["n"]] for r in data["engine_difference_counts"]]
    first = [[r["difference"], r["explanation"] or "–", r["tenant_id"], r["message_key"], r["message_name"] or "–",
              r["bpmn_process_id"], *(target(r, side) for side in SIDES)] for r in data["engine_first_differences"]]
    return _card("The engine and correlake", "Where gold's correlations and the engine's own (its exported "
                 "CORRELATED records) differ, by difference and explanation, and the first such messages "
                 "(view engine_differences; `correlake audit`).",
                 _table(["difference", "explanation", "messages · processes"], counts)
                 + _table(["difference", "explanation", "tenant", "message", "name", "process", "gold", "engine"],
                          first), wide=True)


def _suites() -> dict[str, int]:
    """Expectation suites of `expectations/` and their sizes."""
    return {p.stem: len(json.loads(p.read_text())["expectations"]) for p in sorted(expectations_dir().glob("*.json"))}


def _table(headers: list[str], rows: list[list]) -> str:
    if not rows:
        return '<p class="no-data">no rows</p>'

    def cell(value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return f'<td class="num">{charts.number(value)}</td>'
        return f"<td>{escape(str(value))}</td>"

    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(map(cell, row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _duration(seconds) -> str:
    if seconds is None:
        return "–"
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.3g} s"


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; color: #222; margin: 0; background: #f4f5f7; }}
header {{ background: #1f2d3d; color: #fff; padding: 14px 24px; }}
header h1 {{ margin: 0; font-size: 20px; }} header p {{ margin: 4px 0 0; color: #c9d3dd; }}
main {{ max-width: 1140px; margin: 0 auto; padding: 16px; }}
.kpis {{ display: flex; gap: 12px; flex-wrap: wrap; margin-bottom: 16px; }}
.kpi {{ flex: 1 1 180px; background: #fff; border-radius: 6px; padding: 10px 14px; box-shadow: 0 1px 2px #0002; }}
.kpi b {{ display: block; font-size: 24px; }} .kpi span {{ display: block; }}
.kpi small {{ color: #666; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(540px, 1fr)); gap: 16px; }}
.card {{ background: #fff; border-radius: 6px; padding: 12px 14px; box-shadow: 0 1px 2px #0002; overflow-x: auto; }}
.card h2 {{ font-size: 16px; margin: 0 0 2px; }} .about {{ color: #666; margin: 0 0 8px; font-size: 12px; }}
.grid .wide {{ grid-column: 1 / -1; }} main > .wide {{ margin-top: 16px; }}
table {{ border-collapse: collapse; font-size: 12px; margin-top: 8px; }}
th, td {{ padding: 3px 8px; border-bottom: 1px solid #eee; text-align: left; white-space: nowrap; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.no-data {{ color: #999; font-style: italic; }}
</style></head>
<body><header><h1>correlake report</h1><p>lake {lake} · statuses as of {as_of} UTC · generated {generated}</p></header>
<main><div class="kpis">{kpis}</div>
<div class="grid">{sections}</div>
<section class="card wide"><h2>Last run and its gates</h2>{runs}</section>
</main></body></html>
"""
