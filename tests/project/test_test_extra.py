"""The README's test command (`pip install -e '.[test]' && python -m pytest`) has what the suite
imports: every module a test file imports at its top comes with the test extra."""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).parents[2]
OWN = {"metis", "tests", "benchmarks", "examples", "__future__"}


def _requirement_closure(distribution: str, extras: set[str]) -> set[str]:
    """The distributions ``distribution[extras]`` installs, itself included (names normalized)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(distribution, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            spec, _, marker = line.partition(";")
            match = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", spec)
            assert match, line
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if extra and extra.group(1) not in wanted:
                continue
            inner = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
            todo.append((match.group(1), frozenset(inner)))
    return {name for name, _ in seen}


def _top_level_imports(path: Path) -> set[str]:
    """Modules imported at a test file's top, where a missing one fails its collection.

    A statement at a module's top starts in a line's first column, so only the statements that
    start a line with ``import`` or ``from`` are parsed: parsing every test file whole took
    1.3 s of CPU. A line of a string that reads as an import is parsed too (a stricter check,
    never a weaker one); one that does not parse is not a statement."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: set[str] = set()
    for number, line in enumerate(lines):
        if not line.startswith(("import ", "from ")):
            continue
        statement, end = line, number
        while statement.count("(") > statement.count(")") or statement.endswith("\\"):
            end += 1
            if end == len(lines):
                break
            statement += "\n" + lines[end]
        try:
            tree = ast.parse(statement)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_module_a_test_imports_comes_with_the_test_extra() -> None:
    installed = _requirement_closure("metis", {"test"})
    providers = metadata.packages_distributions()
    missing = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for module in _top_level_imports(path) - OWN - set(sys.stdlib_module_names):
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
            if not dists & installed:
                missing[f"{path.relative_to(ROOT)}: {module}"] = sorted(dists)
    assert missing == {}, "add these to the test extra in pyproject.toml"
