"""`correlake demo` (the README's main job): sample landing, a full run, findings;
a second demo run finds nothing new; another demo is refused in its folder."""

from __future__ import annotations

from support.lake_rows import table_rows

from correlake.interfaces import cli


def test_demo_runs_end_to_end_and_reruns_as_a_noop(demo_run, capsys):
    """The demo is the session's (conftest.py), whose lake the analyst tests read: what follows
    here changes nothing of it."""
    tmp_path, code, out = demo_run
    assert code == 0
    assert "correlake run" in out and "gold:" in out and "to order (START)" in out
    assert f"demo lake: {tmp_path / 'lake'} (its views: ./correlake sql --lake" in out
    lake = str(tmp_path / "lake")
    correlations = table_rows(lake, "correlations", lambda _: ["subscription_type", "bpmn_process_id"])  # delta-rs
    assert any(r["subscription_type"] == "START" for r in correlations)
    assert any(r["bpmn_process_id"] == "billing" for r in correlations)
    # --deliver: every correlation reached the example receiver, once
    assert f"demo receiver: {len(correlations)} events applied, each once" in out
    assert len(table_rows(lake, "quarantine", lambda _: ["reason"])) == 2
    assert cli.main(["demo", "--dir", str(tmp_path), "--hours", "1"]) == 0
    assert "nothing new to ingest" in capsys.readouterr().out
    landing = sorted(p.stat().st_mtime_ns for p in (tmp_path / "landing").rglob("*.jsonl*"))
    assert cli.main(["demo", "--dir", str(tmp_path), "--hours", "2"]) == 2  # other records at the same positions
    assert f"{tmp_path} holds the demo of --hours 1 --seed 7; for --hours 2 --seed 7 give another --dir" in (
        capsys.readouterr().err)
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "landing").rglob("*.jsonl*")) == landing  # untouched
