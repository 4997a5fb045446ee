"""A run imports Great Expectations ahead, on a thread of its own (`gx.import_ahead`)."""

import subprocess
import sys

SCRIPT = """
import sys
from correlake.quality import gx

assert "great_expectations" not in sys.modules
thread = gx.import_ahead()
assert thread.name == "import-great-expectations" and thread.daemon
thread.join(timeout=120)
assert "great_expectations" in sys.modules
assert gx.import_ahead() is None  # once a process
print("imported ahead")
"""


def test_a_fresh_process_imports_great_expectations_on_a_thread_of_its_own(tmp_path):
    script = tmp_path / "ahead.py"  # a file: PySpark's Connect package, which GX imports, exits a `-c` program
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("imported ahead")
