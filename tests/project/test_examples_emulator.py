"""The emulator-backed examples run offline, from any directory, and do what they promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from metis.testing import Emulator

pytestmark = pytest.mark.slow  # each test runs an example in a Python process of its own

EXAMPLES = Path(__file__).parents[2] / "examples"
REAL_SWITCHES = ("_API_KEY", "OLLAMA_HOST")  # what would send an example to a real API


def run(script: str, **variables: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(REAL_SWITCHES)} | variables
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if not variables:
        assert re.fullmatch(
            r"backends: emulator at http://127\.0\.0\.1:\d+ for [a-z_, ]+", lines[0]
        )
    return lines


def test_quickstart_answers_and_reports_stop_reason_and_usage() -> None:
    out = run("quickstart.py")
    assert out[1] == "You said: In one sentence, what is a canonical format?"
    assert out[2] == "stop reason: end_turn (the provider said 'end_turn')"
    assert re.fullmatch(r"usage: [1-9]\d* in, [1-9]\d* out, 0 cache read, 0 cache write", out[3])


def test_mid_session_swap_visits_every_provider_and_keeps_ids_canonical() -> None:
    out = run("mid_session_swap.py")
    text = "\n".join(out)
    turns = [line.split(":")[0] for line in out if re.match(r"\[\d\] ", line)]
    assert turns == [
        "[1] anthropic",
        "[2] openai",
        "[3] gemini",
        "[4] openai_responses",
        "[5] ollama",
    ]
    paris = re.search(r"-> get_weather\(\{'city': 'Paris'\}\) id=tu_(\w+)", text)
    rome = re.search(r"-> get_weather\(\{'city': 'Rome'\}\) id=tu_(\w+)", text)
    assert paris and rome
    assert "[2] openai: According to get_weather: 21°C, sunny." in out
    assert "[4] openai_responses: According to get_weather: 27°C, clear." in out
    assert (
        f"history: 10 messages; tool ids tu_{paris.group(1)}, tu_{rome.group(1)}, all answered"
        in out
    )
    assert re.search(rf"^tu_{paris.group(1)} was issued by anthropic as toolu_\w+$", text, re.M)
    assert re.search(rf"^tu_{rome.group(1)} was issued by gemini as \w+$", text, re.M)
    for provider in ("openai", "gemini", "openai_responses", "ollama"):  # derived, consistently
        assert f"    to {provider}: call_{paris.group(1)}" in out


def test_cancellation_ends_with_partial_text_and_cancelled() -> None:
    out = run("cancellation.py")
    assert re.fullmatch(r"cancel\(req_\w+\) -> True", out[1])
    partial = re.fullmatch(r"partial text after (\d+) deltas: '(.*)'", out[2])
    assert partial and int(partial.group(1)) >= 5
    assert partial.group(2).startswith("You said: Tell me a long story")
    assert not partial.group(2).endswith("what she learns from them.")  # cut short
    assert out[3] == "stop reason: cancelled"


def test_cancellation_cuts_the_reply_of_an_emulator_the_reader_started() -> None:
    """README.md's way without keys: an emulator served apart, the SDK's variables at it.
    Before, the key made the example take it for Anthropic's API and not pace the stream:
    the reply had all arrived before the cancel (``cancel(...) -> False``, ``end_turn``)."""
    with Emulator(port=0) as emulator:
        out = run(
            "cancellation.py",
            ANTHROPIC_BASE_URL=emulator.base_url("anthropic"),
            ANTHROPIC_API_KEY="sk-emulator",
        )
    assert out[0].startswith("backends: anthropic at http://127.0.0.1:")
    assert re.fullmatch(r"cancel\(req_\w+\) -> True", out[1])
    assert out[3] == "stop reason: cancelled"


def test_structured_output_parses_into_the_model_on_both_providers() -> None:
    out = run("structured_output.py")
    for provider in ("anthropic", "openai"):
        at = out.index(f'{provider}: {{"name": "Lyon", "country": "France", "population": 522250}}')
        assert out[at + 1] == "    parsed: City(name='Lyon', country='France', population=522250)"


def test_cost_report_prices_and_reprices_each_call() -> None:
    out = run("cost_report.py")
    rows = [line.split() for line in out if line.startswith(("anthropic:", "openai:"))]
    assert [r[0] for r in rows] == ["anthropic:claude-sonnet-4-5"] * 3 + ["openai:gpt-4o"] * 3
    for row in rows:
        listed, discounted = Decimal(row[5]), Decimal(row[6])
        assert listed > 0 and abs(discounted - listed / 2) <= Decimal("1e-8")
    assert int(rows[0][4]) > 0 and int(rows[1][3]) > 0  # cache written, then read
    total = next(line.split() for line in out if line.startswith("total"))
    assert Decimal(total[1]) != Decimal(total[2])


def test_registry_resolves_aliases_and_refuses_what_a_model_cannot_do() -> None:
    out = run("registry.py")
    assert "adapter anthropic: configured" in out
    assert (
        "adapter mistral: not_configured (environment variable MISTRAL_API_KEY is not set)" in out
    )
    assert "'sonnet' -> anthropic:claude-sonnet-4-5 (adapter anthropic, tier balanced)" in out
    assert "    anthropic:claude-sonnet-4-5 called get_weather({'city': 'Oslo'})" in out
    assert any(line.startswith("'large' -> NotConfiguredError: ") for line in out)
    assert "'fast' -> anthropic:claude-haiku-4-5, supports_tools=False" in out
    refused = next(line for line in out if "CapabilityError" in line)
    assert "claude-haiku-4-5" in refused and "tool" in refused
    assert out[-1] == "    requests the emulator received in all: 1"  # sonnet's, not haiku's


def test_redaction_stage_keeps_addresses_off_the_wire() -> None:
    out = run("custom_stage_redaction.py")
    assert "capability_check -> redact_emails -> system_hoist" in out[1]
    wire = next(line for line in out if line.startswith("wire request to /v1/messages: "))
    assert "Draft a reply to [email] about the invoice." in wire and "@" not in wire
    assert out[-1] == "e-mail addresses on the wire: none"
