"""Every example runs, offline, from any directory, and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"


def run(script: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_stream_with_tools_calls_the_tool_and_answers(provider: str) -> None:
    out = run("stream_with_tools.py", provider)
    assert "-> get_weather({'city': 'Paris', 'unit': 'celsius'})" in out
    assert "[tool_use; 87 tokens out]" in out
    assert out.rstrip().endswith("[end_turn; 24 tokens out]")
    assert "Paris is sunny at 21 °C and Rome is clear at 27 °C." in out


@pytest.mark.slow
def test_custom_stage_runs_inside_the_invariant_check() -> None:
    out = run("custom_stage.py")
    assert "invariants -> mask_cards -> time_to_first_token -> capability_check" in out
    assert "[first token after" in out
    assert "my card is [card]." in out and "4111" not in out  # masked across deltas too


def test_each_example_is_self_contained() -> None:
    """Copied alone into a new project, an example runs: it imports metis and the ecosystem,
    never a helper module that lives beside it."""
    import ast
    from pathlib import Path

    for path in sorted((Path(__file__).parents[1] / "examples").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
                top = node.module.split(".")[0]
                assert not top.startswith("_") and (path.parent / f"{top}.py").exists() is False, (
                    f"{path.name} imports {node.module}"
                )
