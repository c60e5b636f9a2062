"""The library (metis/, the emulator and the other test tools in metis/testing/ included) keeps
every module under 400 lines and every function under 60 (CONTRIBUTING.md): a module past that
is split by concern."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
LIBRARY = ROOT / "metis"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, length in lines) of every function, methods and nested ones too."""
    found: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            assert node.end_lineno is not None
            found.append((name, node.end_lineno - node.lineno + 1))
            found += _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, _HOLDS_STATEMENTS):  # an expression holds no function
            found += _functions(node, prefix)
    return found


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def function_too_long(length: int) -> bool:
    """Under 60 lines: 60 itself is over, as 400 is for a module."""
    return length >= MAX_FUNCTION_LINES


def offenders() -> dict[str, int]:
    """Each module over the module limit and each function over the function limit, with its
    length: ``metis/x.py`` or ``metis/x.py::Class.method``."""
    found: dict[str, int] = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        relative = path.relative_to(ROOT)
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines >= MAX_MODULE_LINES:  # "under 400": 400 itself is over
            found[relative.as_posix()] = lines
        for name, length in _functions(ast.parse(source)):
            if function_too_long(length):
                found[f"{relative.as_posix()}::{name}"] = length
    return found


def test_no_module_over_400_lines_and_no_function_over_60() -> None:
    assert offenders() == {}, "split these by concern"


def test_the_check_sees_long_methods_and_nested_functions() -> None:
    body = "\n".join(f"        x = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class A:\n    def f(self):\n{body}\n        def g():\n            pass\n"
    assert _functions(ast.parse(source)) == [("A.f", MAX_FUNCTION_LINES + 3), ("A.f.g", 2)]


def test_a_function_of_exactly_60_lines_is_over() -> None:
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    [(_, length)] = _functions(ast.parse(f"def f():\n{body}\n"))
    assert length == 60 and function_too_long(length)
    assert not function_too_long(length - 1)
