"""The package's layers (docs/design.md, "Layers"): every import of `correlake`, those
inside functions too, goes from a layer to itself or to one below, and no modules
import each other in a circle."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import correlake

PACKAGE = Path(correlake.__file__).parent

# top to bottom: a module may import its own layer's modules and those of the layers below
LAYERS = (
    ("interfaces",),
    ("driver",),  # the long-lived driver: transport, client, server, warm-up, the kept driver
    ("analysis",),  # what analysts ask of a lake: sql, report, explain (served by a driver)
    ("run",),  # a run's stages, its write and publish, maintenance
    ("caches",),  # what a process keeps from one run to the next
    ("quality",),
    ("transforms",),
    ("delivery",),
    ("lake",),
    ("runtime",),  # the Spark session, signals, memory, threads, codegen, hints, the class archive
    ("samples",),
    ("contract", "semantics"),
    ("config", "errors", "text", "progress", "__init__"),
)
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports anywhere in its code (a `from x import y`
    counts as an import of `x.y` when that is a module, else of `x`; a string that names a
    module, or a module's attribute, as one imported by name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("correlake."):
            targets = [node.value, node.value.rpartition(".")[0]]  # a module named for `import_module`
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found |= {target for target in targets if target in modules and target != name}
    return found


GRAPH = {name: _imports(name, path, _modules()) for name, path in _modules().items()}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_is_in_a_layer():
    assert {_room(m) for m in GRAPH} <= set(RANK), "a new folder of the package needs its place in LAYERS"


def test_imports_go_down_the_layers():
    upward = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets if RANK[_room(b)] < RANK[_room(a)])
    assert upward == []


def test_no_import_circles():
    try:
        TopologicalSorter(GRAPH).prepare()
    except CycleError as circle:
        raise AssertionError(f"modules import each other in a circle: {' -> '.join(circle.args[1])}") from None


def test_the_check_sees_imports_inside_functions():
    """Imports in function bodies count (a dependency a reader follows all the same)."""
    assert "correlake.runtime.session" in GRAPH["correlake.driver.client"]  # imported inside `call`
    assert "correlake.run.maintenance" in GRAPH["correlake.driver.calls"]  # by name, in `SERVED`


def test_no_module_is_over_350_lines():
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 350}
    assert long == {}
