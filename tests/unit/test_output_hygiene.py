"""Terminal output with its control characters escaped (`correlake.text`): a landing
file's name in the run's warning, a quarantine reason and its file in the run's summary,
a path in an error message; other Unicode left alone. (`correlake sql`'s rows:
tests/spark/test_sql_command.py.)"""

from __future__ import annotations

import re

from correlake.interfaces import cli
from correlake.lake.landing import unread_warning
from correlake.run.result import RunResult
from correlake.run.summary import summary
from correlake.text import escape, escape_lines

RED, TITLE = "\x1b[31m", "\x1b]0;pwned\x07"
CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # any control but the line break


def test_controls_are_escaped_and_other_unicode_left_alone():
    assert escape(f"{RED}red\r\n\tx\x00\x7f\x9b") == "\\x1b[31mred\\r\\n\\tx\\x00\\x7f\\x9b"
    assert escape_lines(f"one {RED}\ntwo\r") == "one \\x1b[31m\ntwo\\r"
    assert escape("Grüße, 東京, émoji 🙂, a\\b") == "Grüße, 東京, émoji 🙂, a\\b"
    assert escape(escape(RED)) == escape(RED)  # escaped text is left as it is


def test_landing_file_names_in_the_runs_warning_are_escaped(tmp_path):
    for stream in ("messages", "workflow_events"):
        (tmp_path / stream).mkdir()
    (tmp_path / "messages" / f"a{RED}b\rc.txt").write_text("")
    (tmp_path / "messages" / f".{TITLE}.jsonl").write_text("")
    (tmp_path / "messages" / "new\nline.csv").write_text("")
    warning = unread_warning(tmp_path)
    assert not CONTROLS.search(warning) and "\n" not in warning
    assert "messages/a\\x1b[31mb\\rc.txt" in warning and "messages/.\\x1b]0;pwned\\x07.jsonl (hidden" in warning
    assert "messages/new\\nline.csv" in warning


def test_quarantine_reasons_and_their_files_in_the_summary_are_escaped():
    result = RunResult("r1", files=1, records_read=3, quarantined={f"bad value {RED}": 2},
                       first_quarantined={f"bad value {RED}": f"/landing/messages/x{TITLE}\ny.jsonl:2"})
    text = summary(result)
    assert not CONTROLS.search(text) and len(text.splitlines()) == 7
    assert "bad value \\x1b[31m  (first: /landing/messages/x\\x1b]0;pwned\\x07\\ny.jsonl:2)" in text
    assert "\\x1b[31m" in result.quarantine_excess(0.1) and not CONTROLS.search(result.quarantine_excess(0.1))


def test_a_path_in_an_error_message_is_escaped(tmp_path, capsys):
    lake = tmp_path / f"lake{RED}\rx"
    assert cli.main(["maintain", "--lake", str(lake)]) == 2
    err = capsys.readouterr().err
    assert err == f"correlake: lake folder {tmp_path}/lake\\x1b[31m\\rx does not exist\n"
