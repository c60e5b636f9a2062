"""Every example runs, offline, from any directory, and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


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

    for path in sorted((Path(__file__).parents[2] / "examples").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
                top = node.module.split(".")[0]
                assert not top.startswith("_") and (path.parent / f"{top}.py").exists() is False, (
                    f"{path.name} imports {node.module}"
                )


@pytest.mark.anyio
async def test_the_mask_cards_stage_yields_new_events_and_changes_none_from_inside() -> None:
    import importlib.util

    from metis.model import MessageComplete, StopKind, StopReason, TextBlock, TextDelta, TokenUsage

    spec = importlib.util.spec_from_file_location("custom_stage", EXAMPLES / "custom_stage.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    text = "my card is 4111 1111 1111 1111."
    inner_events = [
        TextDelta(0, "my card is 4111 11"),
        TextDelta(0, "11 1111 1111."),
        MessageComplete([TextBlock(text=text)], StopReason(kind=StopKind.END_TURN), TokenUsage()),
    ]
    before = [event.to_dict() for event in inner_events]

    async def inner(request: object, call: object):  # type: ignore[no-untyped-def]
        for event in inner_events:
            yield event

    out = [event async for event in example.MaskCards()(None, None, inner)]
    assert [event.to_dict() for event in inner_events] == before
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == "my card is [card]."
    final = out[-1]
    assert isinstance(final, MessageComplete) and final.final_content == [
        TextBlock(text="my card is [card].")
    ]


@pytest.mark.slow
def test_agent_loop_runs_the_tools_swaps_and_goes_on_after_a_restore() -> None:
    out = run("agent_loop.py")
    assert "step 1 on anthropic:claude-sonnet-4-5" in out and "step 2 on openai:gpt-4o" in out
    assert "get_weather({'city': 'Paris'}) -> 21°C, sunny" in out
    assert "complete after 2 steps: According to get_weather: 21°C, sunny." in out
    assert "after a restore, openai:" in out and "6 messages in the history" in out


@pytest.mark.slow
def test_cache_loop_reads_each_turn_from_the_cache_and_costs_less() -> None:
    out = run("cache_loop.py")
    assert "turn  2:  2259 in,  2165 read from the cache" in out
    assert "turn 10:  2799 in,  2732 read from the cache" in out
    assert out.rstrip().endswith("ten turns: $0.0185 cached, $0.0761 not: 76% saved")
