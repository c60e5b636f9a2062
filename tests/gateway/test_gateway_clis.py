"""Agent CLIs pointed at ``metis serve`` through their base-URL settings, with the models behind
the gateway of another provider (emulator-backed): Claude Code (Anthropic Messages) answered by
Gemini, Codex CLI (Responses) answered by Claude. Each completes a non-interactive task with a
tool call: the tool runs on the CLI's side and its result goes back through the gateway.

Slow, and skipped where the CLI is not installed: ``npm i @anthropic-ai/claude-code
@openai/codex``, with ``METIS_CLI_PATH`` naming the ``node_modules/.bin`` folder when it is not
on ``PATH``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

pytestmark = pytest.mark.slow


def _cli(name: str) -> str:
    found = shutil.which(name, path=os.environ.get("METIS_CLI_PATH") or os.environ.get("PATH"))
    if found is None:
        pytest.skip(f"{name} is not installed (npm i; METIS_CLI_PATH names its bin folder)")
    return found


def _offline_env(home: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TERM")}
    quiet = dict.fromkeys(
        ["DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"],
        "1",
    )
    return {**keep, **quiet, "HOME": str(home), "CODEX_HOME": str(home), **extra}


@pytest.fixture
def emulator() -> Emulator:
    return Emulator()


@pytest.fixture
def url(emulator: Emulator) -> Iterator[str]:
    with gateway_url(emulator) as served:
        yield served


def test_claude_code_through_the_gateway_to_gemini(
    emulator: Emulator, url: str, tmp_path: Path
) -> None:
    env = _offline_env(
        tmp_path,
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY=GATEWAY_KEY,
        ANTHROPIC_MODEL="flash",
        ANTHROPIC_DEFAULT_HAIKU_MODEL="flash",  # its background tasks' model
        ANTHROPIC_SMALL_FAST_MODEL="flash",  # the same, before Claude Code 2.x renamed it
    )
    task = "Use the Read tool on notes.txt and say what it holds"
    done = subprocess.run(
        [_cli("claude"), "-p", task, "--allowedTools", "Read"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    upstream = [r for r in emulator.requests if "generatecontent" in r.path.lower()]
    assert len(upstream) >= 2 and all(r.status == 200 for r in upstream)
    answered = [
        part
        for content in upstream[-1].json()["contents"]
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]
    assert answered, "the tool's result did not reach Gemini"
    assert "According to Read" in done.stdout


def test_codex_cli_through_the_gateway_to_claude(
    emulator: Emulator, url: str, tmp_path: Path
) -> None:
    provider = {
        "model_provider": "gw",
        "model_providers.gw.name": '"gateway"',
        "model_providers.gw.base_url": f'"{url}/v1"',
        "model_providers.gw.env_key": '"OPENAI_API_KEY"',
        "model_providers.gw.wire_api": '"responses"',
    }
    settings = [item for key, value in provider.items() for item in ("-c", f"{key}={value}")]
    command = [_cli("codex"), "exec", "--skip-git-repo-check", "-m", "sonnet", *settings]
    done = subprocess.run(
        [*command, "List the files here with the Shell"],
        env=_offline_env(tmp_path, OPENAI_API_KEY=GATEWAY_KEY),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    upstream = [r for r in emulator.requests if r.path == "/v1/messages"]
    assert len(upstream) >= 2 and all(r.status == 200 for r in upstream)
    results = [
        block
        for message in upstream[-1].json()["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results, "the tool's result did not reach Claude"
    assert "According to" in done.stdout
