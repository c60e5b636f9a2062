"""Real clients pointed at the emulator: the official SDKs (Anthropic 2.x, OpenAI, google-genai)
as today's versions send their requests, what Claude Code and Codex CLI send, the model lists
and the providers' 404 for an unknown model; and what the emulator still refuses."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator, main

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
genai = ImportOnUse("google.genai")


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def test_the_anthropic_sdk_with_its_bearer_key_and_version(emulator: Emulator) -> None:
    client = anthropic.Anthropic(api_key="sk-emulator", base_url=emulator.url)
    message = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
    )
    assert message.content[0].text == "You said: Hi"
    sent = emulator.requests[-1].headers
    assert sent["authorization"] == "Bearer sk-emulator" and "x-api-key" not in sent
    assert sent["anthropic-version"] == anthropic._constants.ANTHROPIC_API_VERSION
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "Yo"}]
    ) as stream:
        assert stream.get_final_text() == "You said: Yo"
    counted = client.messages.count_tokens(
        model="claude-sonnet-4-6", messages=[{"role": "user", "content": "Hi"}]
    )
    assert counted.input_tokens > 0


def test_the_anthropic_model_list_and_its_404(emulator: Emulator) -> None:
    client = anthropic.Anthropic(api_key="sk-emulator", base_url=emulator.url)
    listed = [model.id for model in client.models.list()]
    assert any(name.startswith("claude-sonnet-4-5") for name in listed) and "gpt-4o" not in listed
    assert client.models.retrieve("claude-sonnet-4-5").id == "claude-sonnet-4-5"
    with pytest.raises(anthropic.NotFoundError) as refused:
        client.messages.create(
            model="claude-sonet-4-5", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
    assert refused.value.body["error"] == {
        "type": "not_found_error",
        "message": "model: claude-sonet-4-5",
    }


def test_the_openai_sdk_chat_responses_and_models(emulator: Emulator) -> None:
    client = openai.OpenAI(api_key="sk-emulator", base_url=emulator.url + "/v1")
    chat = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
    )
    assert chat.choices[0].message.content == "You said: Hi"
    # Codex CLI sends client_metadata on every Responses request
    response = client.responses.create(
        model="gpt-4o", input="Hi", extra_body={"client_metadata": {"a": "b"}}
    )
    assert response.output_text == "You said: Hi"
    listed = [model.id for model in client.models.list()]
    assert "gpt-4o" in listed and "claude-sonnet-4-5" not in listed
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(
            model="gpt-5.2-proo", messages=[{"role": "user", "content": "Hi"}]
        )
    assert refused.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as responses_refused:  # as recorded: a 400 there
        client.responses.create(model="gpt-5.2-proo", input="Hi")
    assert (
        responses_refused.value.body["message"]
        == "The requested model 'gpt-5.2-proo' does not exist."
    )
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-5.2-proo")


def test_the_google_genai_sdk_and_its_404(emulator: Emulator) -> None:
    types = pytest.importorskip("google.genai.types")
    client = genai.Client(api_key="emulator", http_options=types.HttpOptions(base_url=emulator.url))
    reply = client.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    assert reply.text == "You said: Hi"
    assert "models/gemini-2.5-flash" in [model.name for model in client.models.list()]
    with pytest.raises(genai.errors.ClientError) as refused:
        client.models.generate_content(model="gemini-3.6-flahs", contents="Hi")
    assert refused.value.code == 404 and "is not found for API version" in str(refused.value)


def test_what_claude_code_sends_is_accepted_and_its_reminders_are_not_the_users_words(
    emulator: Emulator,
) -> None:
    reminder = (
        "<system-reminder>As you answer, use the Todo Write Tool. Codebase And User Instructions "
        "are in CLAUDE.md; IMPORTANT Context follows.</system-reminder>"
    )
    weather = {
        "name": "get_weather",
        "description": "Current weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "system", "content": "Today is a Tuesday."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": reminder},
                    {"type": "text", "text": "Weather in Paris?"},
                ],
            },
        ],
        "tools": [weather],
        "metadata": {"user_id": "u"},
        "context_management": {"edits": []},
    }
    headers = {
        "authorization": "Bearer k",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "x",
    }
    reply = httpx.post(emulator.url + "/v1/messages?beta=true", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    [call] = [b for b in reply.json()["content"] if b["type"] == "tool_use"]
    assert call["input"] == {"city": "Paris"}


def test_the_scripted_model_follows_refs_in_tool_schemas(emulator: Emulator) -> None:
    schema = {
        "$defs": {
            "Person": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
            }
        },
        "type": "object",
        "properties": {"people": {"type": "array", "items": {"$ref": "#/$defs/Person"}}},
        "required": ["people"],
    }
    tool = {"type": "function", "function": {"name": "add_people", "parameters": schema}}
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Add Alice and Bob."}],
        "tools": [tool],
    }
    reply = httpx.post(
        emulator.url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}
    )
    calls = reply.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [
        '{"people":[{"name":"Alice"},{"name":"Bob"}]}'
    ]


@pytest.mark.parametrize(
    ("headers", "status", "fragment"),
    [
        ({"anthropic-version": "2023-06-01"}, 401, "x-api-key header is required"),
        ({"authorization": "Bearer k", "anthropic-version": "2025-13-01"}, 400, "invalid version"),
        ({"authorization": "Basic k", "anthropic-version": "2023-06-01"}, 401, "x-api-key header"),
    ],
)
def test_what_the_real_api_refuses_is_still_refused(
    emulator: Emulator, headers: dict[str, str], status: int, fragment: str
) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    reply = httpx.post(emulator.url + "/v1/messages", json=body, headers=headers)
    assert reply.status_code == status and fragment in reply.json()["error"]["message"]


def test_help_names_every_mount(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for mount in (
        "/v1/messages",
        "/v1/responses",
        "/v1beta/models",
        "/api/chat",
        "/model/{id}/converse",
    ):
        assert mount in shown
    for mount in (
        "publishers/google",
        "publishers/anthropic",
        "/azure",
        "/openai/v1/models",
        "GET /v1/models",
    ):
        assert mount in shown
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8900 ANTHROPIC_API_KEY=" in shown
    assert max(len(line) for line in shown.split("endpoints:")[0].splitlines()) <= 80


# Claude Code and Codex CLI themselves (npm i @anthropic-ai/claude-code @openai/codex) --------


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


@pytest.mark.slow
def test_claude_code_runs_against_the_emulator(emulator: Emulator, tmp_path: Path) -> None:
    env = _offline_env(tmp_path, ANTHROPIC_BASE_URL=emulator.url, ANTHROPIC_API_KEY="sk-emulator")
    emulator.reset()
    done = subprocess.run(
        [_cli("claude"), "-p", "Say hello"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    served = [r for r in emulator.requests if r.path == "/v1/messages"]
    assert served and all(r.status == 200 for r in served)


@pytest.mark.slow
def test_codex_cli_runs_against_the_emulator(emulator: Emulator, tmp_path: Path) -> None:
    provider: list[Any] = [
        "-c",
        "model_provider=emu",
        "-c",
        'model_providers.emu.name="emulator"',
        "-c",
        f'model_providers.emu.base_url="{emulator.url}/v1"',
        "-c",
        'model_providers.emu.env_key="OPENAI_API_KEY"',
        "-c",
        'model_providers.emu.wire_api="responses"',
    ]
    command = [_cli("codex"), "exec", "--skip-git-repo-check", "-m", "gpt-5", *provider, "Say hi"]
    env = _offline_env(tmp_path, OPENAI_API_KEY="sk-emulator")
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "You said: Say hi" in done.stdout
    served = [r for r in emulator.requests if r.path == "/v1/responses"]
    assert served and all(r.status == 200 for r in served)
    assert all("client_metadata" in r.json() for r in served)
