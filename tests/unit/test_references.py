"""No dangling reference: every module the docs and the package's docstrings and comments
name by its path (`lake/restate.py`, `kept.py`) exists, and every name given with its
module's path (`run/outbox.new_events`, `run/store.Plan`) is defined in that module, so
that docs/design.md's map of where each rule is applied reads true against the code."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import correlake

PACKAGE = Path(correlake.__file__).parent
ROOT = PACKAGE.parents[1]
TEXTS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"] + sorted(PACKAGE.rglob("*.py"))
SUBPACKAGES = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
NAMED = re.compile(r"`((?:[a-z_]+/)*[a-z_]+)\.([A-Za-z_]\w*)`")  # `run/outbox.new_events`, `kept.py`
FILES = {path.name for folder in ("spark", "tests", "scripts") for path in (ROOT / folder).rglob("*.py")} | {
    path.name for path in ROOT.glob("*.py")}


@cache
def _defined(module: Path) -> frozenset[str]:
    """The names a module defines at its top level or in its classes, and those it imports."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return frozenset(names)


def _module(path: str) -> Path | None:
    """The package's module at `path` (`run/outbox`, `correlake/run/outbox`), or None."""
    for candidate in (PACKAGE / f"{path}.py", PACKAGE / path / "__init__.py", PACKAGE.parent / f"{path}.py"):
        if candidate.is_file():
            return candidate
    return None


def dangling(text: str) -> set[str]:
    """The references of `text` to modules that are not there, or to names their module lacks."""
    found = set()
    for path, name in NAMED.findall(text):
        if name == "py":
            if "/" in path and _module(path) is None and not (ROOT / f"{path}.py").is_file() \
                    and not any((ROOT / folder / f"{path}.py").is_file() for folder in ("tests", "scripts")):
                found.add(f"{path}.py")
            elif "/" not in path and f"{path}.py" not in FILES:
                found.add(f"{path}.py")
        elif "/" in path and path.split("/")[0] in SUBPACKAGES:
            module = _module(path)
            if module is None or name not in _defined(module):
                found.add(f"{path}.{name}")
    return found


def test_the_docs_and_the_package_name_only_what_is_there():
    found = {f"{text.relative_to(ROOT)}: {ref}" for text in TEXTS for ref in dangling(text.read_text())}
    assert not found, "\n".join(sorted(found))


def test_a_dangling_reference_is_found():
    assert dangling("see `run/outbox.new_events`, `lake/restate.py` and `driver/kept.py`") == set()
    assert dangling("`run/driver.py`, `lake/restate.nothing`, `nowhere.py`, `gold/messages.message_key`") == {
        "run/driver.py", "lake/restate.nothing", "nowhere.py"}
