"""The library's layers (docs/engine.md, "Layers"): every import in metis/ points down the layer
table or stays in its layer, and no import cycle of any kind exists.

An import counts wherever it is written: at module level, inside a function (a lazy import) or
under ``if TYPE_CHECKING:`` (a type-only import: no cost at run time, but a dependency all the
same). Importing ``metis.a.b`` at run time also runs the package ``metis/a/__init__.py``: when
that package imports metis modules as it loads, the importer depends on those modules too (a
"package" edge). Names
resolved from strings at run time (the stage and codec registries, the lazy export tables)
are not imports.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LIBRARY = ROOT / "metis"

# Bottom up. A module belongs to the layer of the longest pattern that matches its path: a
# folder ("metis/stages/") takes everything under it, a file names itself.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("metis/core/",)),
    ("model", ("metis/model/", "metis/errors.py")),
    ("config", ("metis/core/config_files.py", "metis/core/secrets.py")),
    ("http clients", ("metis/transport/clients.py", "metis/transport/httpx_private.py")),
    ("catalog", ("metis/catalog/",)),
    ("wire", ("metis/wire/",)),
    ("telemetry", ("metis/telemetry/",)),
    ("pipeline", ("metis/pipeline/",)),
    ("transport", ("metis/transport/",)),
    ("stages", ("metis/stages/",)),
    (
        "engine",
        (
            "metis/pipeline/pipeline.py",
            "metis/pipeline/provider.py",
            "metis/pipeline/segments.py",
            "metis/pipeline/send.py",
            "metis/pipeline/skeleton.py",
        ),
    ),
    ("stacks", ("metis/stacks/",)),
    ("adapter", ("metis/adapter/",)),
    ("routing", ("metis/routing/",)),
    ("registry", ("metis/registry/",)),
    ("redis", ("metis/redis/",)),
    (
        "helpers",
        (
            "metis/calls/",
            "metis/sessions/",
            "metis/tools.py",
            "metis/tool_making.py",
            "metis/tool_schemas.py",
            "metis/tool_results.py",
            "metis/histories/",
            "metis/cost.py",
        ),
    ),
    ("gateway", ("metis/gateway/",)),
    ("testing", ("metis/testing/",)),
    ("cli", ("metis/cli/",)),
    (
        "surface",
        (
            "metis/__init__.py",
            "metis/__main__.py",
            "metis/pipeline/__init__.py",
            "metis/session_redis.py",
            "metis/routing/availability_redis.py",
            "metis/routing/limits_redis.py",
        ),
    ),
)

# Imports that work in progress removes (issue 20): (importer, what it imports, or a package of
# it) -> the move that removes it. Each is left out of both checks; an entry whose import is
# gone fails test_every_pending_import_is_still_there, so that it goes too.
PENDING: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    importer: str  # module name
    imported: str
    line: int
    kind: str  # "module", "lazy", "type" or "package"

    def where(self) -> str:
        return f"{path_of(self.importer)}:{self.line} ({self.kind}) imports {self.imported}"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def path_of(module: str) -> str:
    return MODULES[module].relative_to(ROOT).as_posix()


def layer_of(module: str) -> int:
    path = path_of(module)
    matches = [
        (len(pattern), index)
        for index, (_, patterns) in enumerate(LAYERS)
        for pattern in patterns
        if path == pattern or (pattern.endswith("/") and path.startswith(pattern))
    ]
    assert matches, f"{path} is in no layer: add it to the table in tests/project/test_layers.py"
    return max(matches)[1]


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imports(node: ast.AST, kind: str) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement under ``node``, with its kind."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append((child, kind))
        elif isinstance(child, ast.If) and _is_type_checking(child):
            for inner in child.body:
                found += _imports(ast.Module(body=[inner], type_ignores=[]), "type")
            for inner in child.orelse:
                found += _imports(ast.Module(body=[inner], type_ignores=[]), kind)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            found += _imports(child, "type" if kind == "type" else "lazy")
        elif isinstance(child, _HOLDS_STATEMENTS):  # an expression holds no import
            found += _imports(child, kind)
    return found


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _known(name: str) -> str | None:
    """The metis module ``name`` denotes (a module, or a name inside one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(statement: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        base = statement.module or ""
        if statement.level:
            package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
            anchor = package.split(".")[: len(package.split(".")) - statement.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        names = [f"{base}.{alias.name}" for alias in statement.names]
    return [target for name in names if (target := _known(name)) is not None]


def direct_edges(module: str) -> list[Edge]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return [
        Edge(module, target, statement.lineno, kind)
        for statement, kind in _imports(tree, "module")
        for target in _targets(statement, module)
        if target != module
    ]


@functools.cache  # three tests read it; one scan of every module serves them
def all_edges() -> tuple[Edge, ...]:
    direct = {module: direct_edges(module) for module in MODULES}
    loads = {m for m, edges in direct.items() if any(e.kind == "module" for e in edges)}
    edges = list(dict.fromkeys(edge for found in direct.values() for edge in found))
    for edge in [e for e in edges if e.kind != "type"]:  # metis.a.b runs metis/a/__init__.py
        parts = edge.imported.split(".")
        for depth in range(2, len(parts)):
            package = ".".join(parts[:depth])
            own = edge.importer == package or edge.importer.startswith(package + ".")
            if package in loads and not own and package != edge.imported:
                edges += [
                    Edge(edge.importer, load.imported, edge.line, "package")
                    for load in direct[package]
                    if load.kind == "module" and load.imported != edge.importer
                ]
    return tuple(dict.fromkeys(edges))


def pending(edge: Edge) -> tuple[str, str] | None:
    for importer, imported in PENDING:
        if edge.importer == importer and (
            edge.imported == imported or edge.imported.startswith(imported + ".")
        ):
            return (importer, imported)
    return None


def checked_edges() -> list[Edge]:
    return [edge for edge in all_edges() if pending(edge) is None]


def upward(edges: list[Edge]) -> list[str]:
    return [
        f"{edge.where()}: {LAYERS[layer_of(edge.importer)][0]} -> "
        f"{LAYERS[layer_of(edge.imported)][0]}"
        for edge in edges
        if layer_of(edge.imported) > layer_of(edge.importer)
    ]


def cycles(edges: list[Edge]) -> list[list[Edge]]:
    """The strongly connected groups of more than one module, each as its inner edges."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while (member := stack.pop()) != node:
                group.add(member)
            groups.append(group | {node})

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [
        [e for e in edges if e.importer in group and e.imported in group]
        for group in groups
        if len(group) > 1
    ]


def test_every_import_points_down_the_layer_table() -> None:
    found = upward(checked_edges())
    assert not found, "imports going up the layer table:\n" + "\n".join(found)


def test_no_import_cycle_of_any_kind() -> None:
    found = ["\n".join(edge.where() for edge in group) for group in cycles(checked_edges())]
    assert not found, "import cycles:\n\n" + "\n\n".join(found)


def test_the_root_package_loads_only_the_bottom_layer() -> None:
    """Every import of metis runs metis/__init__.py first: what it loads as it runs is loaded
    by everything, so it is only the bottom layer (its public names load on first use)."""
    loaded = {edge.imported for edge in direct_edges("metis") if edge.kind == "module"}
    assert {LAYERS[layer_of(module)][0] for module in loaded} <= {LAYERS[0][0]}


def test_every_pending_import_is_still_there() -> None:
    seen = {pending(edge) for edge in all_edges()}
    assert [key for key in PENDING if key not in seen] == [], "remove these from PENDING"


FIRST_IMPORT = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "metis" or m.startswith("metis.")]:
        del sys.modules[loaded]
    module, _, attribute = name.partition(":")
    try:
        imported = importlib.import_module(module)
        if attribute:
            getattr(imported, attribute)
    except ModuleNotFoundError as exc:
        if (exc.name or "metis").partition(".")[0] == "metis":
            failed.append(f"{name}: {exc!r}")
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed))
"""


def first_imports(names: list[str]) -> list[str]:
    """Each of ``names`` imported first, in an interpreter that has no other metis module
    loaded (a module-level cycle shows only then); the ones that failed, with why. A name
    ``module:attribute`` is the module imported first, then the attribute read from it."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORT, *names],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_the_telemetry_modules_import_first_in_a_fresh_interpreter() -> None:
    """The OpenTelemetry sink's module once imported the package that imported it back."""
    telemetry = [name for name in MODULES if name.startswith("metis.telemetry")]
    assert first_imports(["metis.telemetry.otel:OpenTelemetrySink", *telemetry]) == []


@pytest.mark.slow  # a fresh set of modules for each of about 300 (a minute or two)
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    assert first_imports([name for name in sorted(MODULES) if "__main__" not in name]) == []


def test_the_scan_sees_every_kind_of_import() -> None:
    source = (
        "import metis.errors\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from metis.adapter import Adapter\n"
        "    def f():\n"
        "        import metis.cli\n"
        "class A:\n"
        "    from . import call\n"
        "    def g(self):\n"
        "        from ..model import content\n"
    )
    found = [
        (_targets(statement, "metis.pipeline.stage"), kind)
        for statement, kind in _imports(ast.parse(source), "module")
    ]
    assert found == [
        (["metis.errors"], "module"),
        ([], "module"),  # typing: not a metis module
        (["metis.adapter"], "type"),
        (["metis.cli"], "type"),
        (["metis.pipeline.call"], "module"),
        (["metis.model.content"], "lazy"),
    ]
    assert LAYERS[layer_of("metis.pipeline.call")][0] == "pipeline"
    assert LAYERS[layer_of("metis.pipeline.pipeline")][0] == "engine"
    assert LAYERS[layer_of("metis.pipeline")][0] == "surface"


def test_a_cycle_through_a_type_only_import_is_found() -> None:
    edges = [
        Edge("metis.a", "metis.b", 1, "module"),
        Edge("metis.b", "metis.c", 2, "lazy"),
        Edge("metis.c", "metis.a", 3, "type"),
        Edge("metis.c", "metis.d", 4, "module"),
    ]
    assert cycles(edges) == [edges[:3]]
