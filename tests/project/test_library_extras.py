"""A user's install has what the library imports: every module a library file imports at its
top comes with metis's own dependencies, and the gateway's (metis/gateway/) with the serve
extra, as pyproject.toml declares them (a fresh `pip install 'metis[serve]'`: `metis serve`
once stopped at 'needs sniffio', which the test extra's trio had brought to every checkout)."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from tests.project.test_test_extra import _requirement_closure, _top_level_imports

ROOT = Path(__file__).parents[2]
EXTRA_OF_FOLDER = {"gateway": "serve"}


def _declared(requirements: list[str]) -> set[str]:
    """The distributions these requirement lines install, with what each requires in turn."""
    installed: set[str] = set()
    for line in requirements:
        match = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", line)
        assert match, line
        extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
        installed |= _requirement_closure(match.group(1), extras)
    return installed


def test_every_module_the_library_imports_comes_with_its_install() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _declared(project["dependencies"])
    extras = project["optional-dependencies"]
    providers = metadata.packages_distributions()
    missing = {}
    for path in sorted((ROOT / "metis").rglob("*.py")):
        folder = path.relative_to(ROOT / "metis").parts[0]
        extra = EXTRA_OF_FOLDER.get(folder)
        installed = core | (_declared(extras[extra]) if extra else set())
        for module in _top_level_imports(path) - {"metis", "__future__"}:
            if module in sys.stdlib_module_names:
                continue
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
            if not dists & installed:
                missing[f"{path.relative_to(ROOT)}: {module}"] = extra or "dependencies"
    assert missing == {}, "declare these in pyproject.toml (where each says)"
