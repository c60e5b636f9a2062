"""examples/fallback.py runs offline and shows the fallback it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "fallback.py"


@pytest.mark.slow
def test_the_fallback_example_serves_claudes_tool_call_from_another_provider() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "OLLAMA_HOST"))}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, env=env, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    served = [line for line in out if line.startswith("[")]
    assert served == [
        "[1] served by anthropic:claude-sonnet-4-5",
        "[2] served by openai:gpt-4o",
        "[3] served by openai:gpt-4o",
        "[4] served by openai:gpt-4o",
    ]
    assert "    anthropic:claude-sonnet-4-5 failed: overloaded: Overloaded" in out
    assert out.index("    According to get_weather: 21°C, sunny.") > out.index(served[1])
    assert any(
        line.startswith("    anthropic:claude-sonnet-4-5 skipped: cooling down") for line in out
    )
