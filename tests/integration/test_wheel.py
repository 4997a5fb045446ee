"""An installable package: the wheel built from this checkout, installed in a fresh virtual
environment outside it, runs `correlake demo` from a folder of its own, reading the SQL
and the GX suites it carries (`setup.py`, `config.data_dir`), not the checkout's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from correlake.config import PROJECT_ROOT, SparkSettings

SOURCES = ("pyproject.toml", "setup.py", "README.md", "spark", "sql", "expectations", "examples/consumers")


def test_the_wheel_installed_outside_the_checkout_runs_the_demo(tmp_path):
    source, dist = tmp_path / "source", tmp_path / "dist"  # built from a copy: the checkout gets no build folders
    for name in SOURCES:
        copy = shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        copy(PROJECT_ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)],
                   check=True, capture_output=True)
    (wheel,) = dist.glob("correlake-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for carried in ("correlake/_data/sql/restate.sql", "correlake/_data/sql/rules/buffered.sql",
                    "correlake/_data/expectations/silver.json", "correlake/_data/examples/consumers/webhook_receiver.py",
                    "correlake/runtime/log4j2.properties"):
        assert carried in names

    # A fresh environment: the wheel itself, its dependencies seen from this one (a path, not
    # its .pth files, so not this checkout's editable install).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    clean = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}  # no checkout on its path
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", str(wheel)], check=True, env=clean)
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # after: pip would see ours

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {**clean, "CORRELAKE_HOME": str(home), "CORRELAKE_JARS": str(SparkSettings().jars_dir),
           "CORRELAKE_KEEP_DRIVER": "0"}
    where = subprocess.run([str(python), "-c", "import correlake.config as c; print(c.__file__); print(c.sql_dir())"],
                           check=True, capture_output=True, text=True, env=env, cwd=work).stdout.split()
    assert all(Path(p).is_relative_to(site) for p in where), where
    demo = subprocess.run([str(venv / "bin" / "correlake"), "demo", "--dir", str(work / "demo"), "--hours", "1"],
                          capture_output=True, text=True, env=env, cwd=work, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "correlations" in demo.stdout and (work / "demo" / "lake" / "gold" / "correlations").is_dir()
    assert "Using incubator modules" not in demo.stdout + demo.stderr  # the JVM's notice kept off the console
