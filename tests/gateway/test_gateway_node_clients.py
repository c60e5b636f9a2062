"""The JavaScript clients of ``metis serve``, unchanged but for their base URL: the official
``openai`` and ``@anthropic-ai/sdk`` packages and the Vercel AI SDK (``ai`` with
``@ai-sdk/openai`` and ``@ai-sdk/anthropic``), each answered by models of another family
(emulator-backed): streamed and not, a tool over two turns, structured output, and the
gateway's errors as each client's own exception (tests/gateway/node/clients.mjs runs them).

Slow, and skipped where node or the packages are missing: ``npm install --prefix DIR`` with
tests/gateway/node/package.json in DIR (outside the repository; .ci/run does it into
``.ci-node``), and ``METIS_NODE_MODULES`` naming ``DIR/node_modules``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "node" / "clients.mjs"
PACKAGES = ["openai", "@anthropic-ai/sdk", "ai", "@ai-sdk/openai", "@ai-sdk/anthropic", "zod"]
CHECKS = [
    "openai_chat",
    "openai_chat_tools_two_turns",
    "openai_run_tools",
    "openai_chat_parse_zod",
    "openai_responses",
    "openai_responses_tools_two_turns",
    "openai_errors",
    "openai_with_response_headers",
    "anthropic_messages",
    "anthropic_tools_two_turns",
    "anthropic_tool_runner",
    "anthropic_errors",
    "ai_sdk_openai_chat",
    "ai_sdk_openai_responses",
    "ai_sdk_anthropic",
    "ai_sdk_errors",
]
LIMITED = "gw-limited-key"
"""Two gateway keys, this with ``-openai`` and ``-anthropic`` after it: one request a minute."""


def _node_modules() -> Path:
    node = shutil.which("node")
    folder = Path(os.environ.get("METIS_NODE_MODULES", "/nonexistent"))
    missing = [name for name in PACKAGES if not (folder / name / "package.json").exists()]
    if node is None or missing:
        pytest.skip(
            "node or the JavaScript clients are missing (npm install --prefix DIR with "
            "tests/gateway/node/package.json; METIS_NODE_MODULES=DIR/node_modules)"
        )
    return folder


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, dict[str, str]]]:
    """Every check's outcome, from one run of the script against one gateway."""
    modules = _node_modules()
    keys = [
        {
            "name": f"limited-{sdk}",
            "sha256": hashlib.sha256(f"{LIMITED}-{sdk}".encode()).hexdigest(),
            "requests_per_minute": 1,
        }
        for sdk in ("openai", "anthropic")
    ]
    with gateway_url(Emulator(), keys=keys) as url:
        done = subprocess.run(
            ["node", str(SCRIPT), url, GATEWAY_KEY, LIMITED, str(modules)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    yield {line["check"]: line for line in lines}


@pytest.mark.parametrize("check", CHECKS)
def test_javascript_client(outcomes: dict[str, dict[str, str]], check: str) -> None:
    outcome = outcomes.get(check)
    assert outcome is not None, f"{check} did not run"
    assert outcome["ok"], outcome.get("error")


def test_every_check_the_script_ran_is_listed(outcomes: dict[str, dict[str, str]]) -> None:
    assert set(outcomes) == set(CHECKS)
