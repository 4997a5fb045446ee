"""The wheel carries the project's top-level `sql/`, `expectations/` and the example
consumers as package data, under `correlake/_data/` (`config.data_dir` finds them there
in an installed package, and in the checkout otherwise). Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = {"sql": "sql", "expectations": "expectations", "examples/consumers": "examples/consumers"}


class BuildWithData(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's folders
            return
        for source, target in DATA.items():
            shutil.copytree(ROOT / source, Path(self.build_lib) / "correlake" / "_data" / target,
                            ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithData})
