"""The README's code compiles and imports only what metis exports; import stays cheap."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import metis

ROOT = Path(__file__).parents[2]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


def test_readme_code_compiles_and_its_metis_imports_exist() -> None:
    blocks = python_blocks(ROOT / "README.md")
    assert blocks
    for block in blocks:
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "metis":
                for alias in node.names:
                    assert hasattr(metis, alias.name), alias.name


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]' && python -m pytest" in readme
    assert "pip install --quiet -e '.[test]'" in ci and "step python -m pytest" in ci


def test_importing_metis_loads_no_http_or_validation_library() -> None:
    heavy = "{'httpx', 'pydantic', 'anyio', 'yaml', 'tenacity'}"
    code = f"import sys, metis; print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_document_the_code_points_to_exists() -> None:
    named: set[str] = set()
    for path in [*ROOT.glob("metis/**/*.py"), *ROOT.glob("metis/**/*.yaml"), ROOT / "README.md"]:
        named.update(re.findall(r"docs/[a-z_\-]+\.md", path.read_text(encoding="utf-8")))
    assert named, "the code names no document"
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert missing == []


def test_the_docs_python_blocks_compile() -> None:
    for path in ROOT.glob("docs/*.md"):
        for block in python_blocks(path):
            ast.parse(block)  # SyntaxError names the document's line


def own_docstring(obj: object) -> str | None:
    """A class's or function's own docstring; None for none, or for the signature a
    dataclass writes for a class without one (``TextDelta(content_block_index: int, ...)``)."""
    import inspect

    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    name = getattr(obj, "__name__", "")
    if not doc or doc.startswith(f"{name}("):
        return None
    return str(doc)


def test_every_public_name_has_its_own_docstring() -> None:
    import inspect

    import metis.pipeline

    bare = [
        f"{module.__name__}.{name}"
        for module in (metis, metis.pipeline)
        for name in module.__all__
        if (inspect.isclass(obj := getattr(module, name)) or inspect.isfunction(obj))
        and own_docstring(obj) is None
    ]
    assert bare == []


def test_every_relative_link_of_the_docs_leads_to_a_file() -> None:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(ROOT.glob("docs/*.md"))]
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
        if not target.startswith(("http://", "https://")) and not (page.parent / target).exists()
    ]
    assert broken == []


def test_the_readme_and_the_contract_name_every_event_type() -> None:
    from metis.model import events

    kinds = sorted(
        cls.type
        for cls in vars(events).values()
        if isinstance(cls, type)
        and issubclass(cls, events.StreamEvent)
        and cls is not events.StreamEvent
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = re.search(r"`stream\(\)` yields (\w+) event types(.*?)\n\n", readme, re.DOTALL)
    assert said, "README.md no longer says what stream() yields"
    assert said.group(1) == {9: "nine", 10: "ten", 11: "eleven"}.get(len(kinds))
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    for kind in kinds:
        assert f"`{kind}`" in said.group(2) and f"| `{kind}` |" in contract, kind


def test_the_keys_the_docs_suggest_leave_error_messages_whole() -> None:
    """metis hides an API key wherever it stands in an error message; a key the docs suggest
    for the emulator that is an English word (``any``) blanked that word out of every message
    (``does not match [REDACTED] of the expected tags``)."""
    from metis.errors import redact

    message = (
        "messages.0.content.0: Input tag 'txt' found using 'type' does not match any of the "
        "expected tags; tool_choice.type: one of auto, any, tool or none; a test key; no key"
    )
    pages = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]
    suggested = {
        (page.name, key)
        for page in pages
        for key in re.findall(r"_API_KEY=([^\s`\\\"']+)", page.read_text(encoding="utf-8"))
        if key not in ("...", "$KEY")
    }
    assert suggested, "the docs suggest no key"
    blanked = sorted(f"{page}: {key}" for page, key in suggested if redact(message, key) != message)
    assert blanked == []


CLAUDE_CODE_ALIASES = {"default", "sonnet", "opus", "haiku", "opusplan", "sonnet[1m]"}
"""Names Claude Code turns into Claude model ids of its own before it sends them."""


def test_claude_code_pointed_at_the_gateway_names_models_the_file_serves() -> None:
    """Claude Code asks for Claude's own model ids unless told a name; the examples' gateway
    file serves none of them, so a command without ``ANTHROPIC_MODEL`` (or with one of Claude
    Code's aliases) gets a 404 for every request."""
    import yaml

    config = yaml.safe_load((ROOT / "examples" / "gateway.yaml").read_text(encoding="utf-8"))
    served = {*config["models"], *config.get("routes", {})}
    served |= {alias for entry in config["models"].values() for alias in entry.get("aliases", [])}
    pages = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]
    commands = [
        (page.name, command)
        for page in pages
        for command in re.findall(
            r"ANTHROPIC_BASE_URL=http://127\.0\.0\.1:4000 (?:[^\n]|\\\n)*?\bclaude(?=[ \n])",
            page.read_text(encoding="utf-8"),
        )
    ]
    assert commands, "no document shows Claude Code against the gateway"
    for page, command in commands:
        names = dict(re.findall(r"(ANTHROPIC_MODEL|ANTHROPIC_DEFAULT_HAIKU_MODEL)=(\S+)", command))
        for variable in ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"):
            name = names.get(variable)
            assert name in served and name not in CLAUDE_CODE_ALIASES, (page, variable, name)


def test_the_property_search_sizes_the_docs_give_are_the_suites() -> None:
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    default = re.search(r"^DEFAULT_RUN_EXAMPLES = (\d+)$", conftest, re.MULTILINE)
    full = re.search(r"^FULL_SEARCH_EXAMPLES = (\d+)$", conftest, re.MULTILINE)
    assert default and full
    sizes = (int(full[1]), int(default[1]))
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    given = re.findall(r"at (\d+) examples, not (\d+)", contributing)
    given += [
        (b, a)
        for a, b in re.findall(r"tries (\d+) examples in the default run and (\d+)", contributing)
    ]
    assert given and {(int(a), int(b)) for a, b in given} == {sizes}


def test_the_docs_import_the_extension_names_from_metis_pipeline() -> None:
    """A block of the docs imports a name of ``metis.pipeline.__all__`` from
    ``metis.pipeline``, where docs/names.md lists it, not from the module that defines it
    (``metis.pipeline.call``)."""
    import metis.pipeline

    public = set(metis.pipeline.__all__)
    pages = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]
    deep = [
        f"{path.name}: from {node.module} import {alias.name}"
        for path in pages
        for block in python_blocks(path)
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("metis.pipeline.")
        for alias in node.names
        if alias.name in public
    ]
    assert deep == []


def test_the_calls_options_table_names_every_option_the_calls_take() -> None:
    """docs/calls.md's table is where a reader looks an option up (``cache`` was missing)."""
    from metis.calls.request import CallOptions

    doc = (ROOT / "docs" / "calls.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Options") : doc.index("An option the call does not take")]
    named = {
        name
        for row in re.findall(r"^\| (.+?) \|", table, re.MULTILINE)
        for name in re.findall(r"`([a-z_]+)`", row)
    }
    assert set(CallOptions.__optional_keys__) | set(CallOptions.__required_keys__) <= named


def test_no_table_of_the_docs_is_cut_by_a_blank_line() -> None:
    """A row after a blank line starts a new table, which needs a header: without one the rows
    render as text (docs/reasoning.md's wire table lost its second half so)."""
    separator = re.compile(r"^\|[\s:|-]+\|$")
    cut = []
    for page in [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]:
        lines = page.read_text(encoding="utf-8").splitlines()
        fenced = False
        for number, line in enumerate(lines):
            fenced ^= line.lstrip().startswith("```")
            starts = line.startswith("|") and (number == 0 or not lines[number - 1].strip())
            if not fenced and starts and not separator.match(lines[number + 1].strip()):
                cut.append(f"{page.relative_to(ROOT)}:{number + 1}")
    assert cut == []
