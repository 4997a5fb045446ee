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
    ("caches",),  # what a process caches from one run to the next
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


JVM = ("._jdf", "._jsparkSession", "._jvm")  # Spark's JVM reached past its Python API
TUNING = (".localCheckpoint(", ".checkpoint(", "broadcast")  # how a plan runs, not what it computes
# Lines allowed until their modules' owners move them to runtime/ (issue 81, item 3): the
# bronze stage's split size, the table cache's size estimate, maintenance's Delta log.
ALLOWED = {
    ("correlake.transforms.bronze", "target = spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes()"),
    ("correlake.lake.table_cache",
     "size = int(table._jdf.queryExecution().analyzed().stats().sizeInBytes())  # from its snapshot"),
    ("correlake.run.maintenance", "jvm = spark._jvm"),
    ("correlake.run.maintenance",
     "delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)"),
}


def _lines_with(rooms: tuple[str, ...], words: tuple[str, ...], outside: str = "") -> list[str]:
    """`module: line` of each line of a module in `rooms` (outside the package `outside`) holding one of `words`."""
    return [f"{name}: {line.strip()}" for name, path in _modules().items()
            if _room(name) in rooms and not (outside and name.startswith(outside))
            for line in path.read_text().splitlines()
            if any(word in line for word in words) and (name, line.strip()) not in ALLOWED]


def test_the_rules_in_transforms_do_not_reach_the_backends():
    """`transforms/` states the rules; the run's backends (run/backends/) apply them."""
    assert [f"{a} -> {b}" for a, targets in GRAPH.items() if _room(a) == "transforms"
            for b in targets if b.startswith("correlake.run")] == []


def test_only_the_spark_backend_and_runtime_reach_the_jvm():
    assert _lines_with(("transforms", "lake", "run"), JVM, outside="correlake.run.backends") == []


def test_no_checkpoint_or_broadcast_hint_in_the_rules():
    assert _lines_with(("transforms",), TUNING) == []
