"""Errors that say where the mistake is and what was meant: the message's index and the
nearest role or key, the tool's parameter, the nearest stack, the stack serving a catalog
provider id, the catalog's nearest models."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import metis
from metis import AdapterConfig, CanonicalRequest, InvalidRequestError, build_adapter
from metis.catalog.lookup import _warned
from metis.errors import ConfigError
from metis.testing.emulator import Emulator

HELLO = {"role": "user", "content": "Hello"}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "usr", "content": "Hi"}, "messages[1]: unknown role 'usr'; did you mean 'user'?"),
        ({"role": "developer", "content": "Hi"}, "messages[1]: unknown role 'developer'; did you"),
        (
            {"role": "user", "contnt": "Hi"},
            "messages[1]: unknown key 'contnt'; did you mean 'content'",
        ),
        ({"rol": "user", "content": "Hi"}, "messages[1]: unknown key 'rol'; did you mean 'role'"),
        ({"content": "Hi"}, "messages[1]: no 'role'"),
        ("Hi", "messages[1]: expected a Message or a dict, got str"),
        (
            {"role": "user", "content": [{"type": "txt", "text": "Hi"}]},
            "messages[1].content[0]: unknown block type 'txt'; did you mean 'text'",
        ),
        (
            {"role": "user", "content": [{"type": "text", "txet": "Hi"}]},
            "messages[1].content[0]: unknown key 'txet'; did you mean 'text'",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "nmae": "f"}]},
            "messages[1].content[0]: unknown key 'nmae'; did you mean 'name'",
        ),
        (
            {"role": "user", "content": [{"type": "text", "text": 3}]},
            "messages[1].content[0].text: Input should be a valid string",
        ),
        (
            {"role": "assistant", "content": None},
            "messages[1].content: expected a string or a list of content blocks, got NoneType",
        ),
        (  # OpenAI Chat's forms: said where such a history is read
            {"role": "assistant", "content": None, "tool_calls": []},
            "messages[1]: unknown key 'tool_calls'; a message in OpenAI Chat's form is read by "
            "metis.histories.from_openai_chat",
        ),
        (
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
            "messages[1]: unknown key 'tool_call_id'; a message in OpenAI Chat's form",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
            "messages[1].content[0]: unknown block type 'image_url'; a message in OpenAI Chat's",
        ),
    ],
)
def test_a_wrong_dict_message_names_its_index_and_the_nearest_name(
    message: Any, expected: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        CanonicalRequest(model="m", max_output_tokens=10, messages=[HELLO, message])
    assert expected in str(caught.value)


@pytest.mark.anyio
async def test_a_one_line_call_names_the_wrong_message_before_sending(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    history = [HELLO, {"role": "assistant", "content": "Hi!"}, {"role": "usr", "content": "?"}]
    with pytest.raises(InvalidRequestError, match=r"messages\[2\]: unknown role 'usr'"):
        await metis.acomplete("anthropic:claude-sonnet-4-5", history)  # type: ignore[arg-type]
    assert emulator.stats.requests == 0


def _with_a_socket(city: str, connection: socket.socket) -> str:
    return city


def _with_a_callback(city: str, callback: Callable[[int], int]) -> str:
    return city


@pytest.mark.parametrize(
    ("function", "parameter", "type_name"),
    [
        (_with_a_socket, "connection", "socket.socket"),
        (_with_a_callback, "callback", "Callable"),
    ],
)
def test_an_unsupported_tool_parameter_type_names_the_tool_and_the_parameter(
    function: Callable[..., Any], parameter: str, type_name: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        metis.tool(function)
    text = str(caught.value)
    assert f"tool {function.__name__!r}" in text and f"parameter {parameter!r}" in text
    assert type_name in text


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("antropic:claude-sonnet-4-5", "did you mean 'anthropic'"),
        ("opnai:gpt-4o", "did you mean 'openai'"),
        ("google:gemini-2.5-flash", "served by the stack 'gemini' (write gemini:MODEL)"),
        ("amazon-bedrock:amazon.nova-pro-v1:0", "the stacks 'bedrock', 'bedrock_anthropic'"),
        ("fireworks-ai:llama", "served by the stack 'fireworks'"),
        ("azure-openai:gpt-4o", "did you mean 'azure' or 'openai'"),
        ("vertex_ai:gemini-2.5-flash", "did you mean 'vertex'"),
    ],
)
def test_a_wrong_provider_says_what_was_meant(model: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        metis.complete(model, "Hi")
    assert expected in str(caught.value)
    with pytest.raises(ConfigError) as built:
        build_adapter(model.partition(":")[0])
    assert expected in str(built.value)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("azure/gpt-4o", "did you mean 'azure:gpt-4o'"),
        ("vertex_ai/gemini-2.5-flash", "did you mean 'vertex:gemini-2.5-flash'"),
        ("openrouter/anthropic/claude-3", "did you mean 'openrouter:anthropic/claude-3'"),
    ],
)
def test_a_provider_before_a_slash_as_litellm_writes_it_says_what_was_meant(
    model: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        metis.complete(model, "Hi")
    assert expected in str(caught.value)


def test_an_uncatalogued_model_warning_names_the_closest_known_models(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _warned.discard(("anthropic", "claude-sonet-4-5"))
    with caplog.at_level(logging.WARNING, logger="metis"):
        build_adapter("anthropic", AdapterConfig(api_key="k")).capabilities_for("claude-sonet-4-5")
    (warn,) = [r for r in caplog.records if getattr(r, "event", "") == "metis.uncatalogued_model"]
    assert "claude-sonnet-4-5" in warn.closest
    assert "(closest: claude-sonnet-4-5" in warn.getMessage()


def test_the_reader_the_error_names_is_there_after_import_metis_alone() -> None:
    """``metis.histories.from_openai_chat`` was an AttributeError after ``import metis``: the
    subpackage loaded only when imported by name. It still does not load with metis."""
    code = (
        "import sys, metis\n"
        "assert 'metis.histories' not in sys.modules\n"
        "chat = [{'role': 'user', 'content': 'Hi'}]\n"
        "print(metis.histories.from_openai_chat(chat)[0].text)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hi"


def test_the_subpackages_the_docs_name_are_there_after_import_metis_alone() -> None:
    """README.md and docs/calls.md write ``metis.telemetry.set_default_sink(...)``: after
    ``import metis`` alone it was an AttributeError. Any subpackage loads on first use; a name
    that is none is still an AttributeError, with no import error chained to it."""
    code = (
        "import sys, metis\n"
        "assert 'metis.telemetry' not in sys.modules\n"
        "metis.telemetry.set_default_sink(metis.LoggingSink())\n"
        "print(metis.errors.RETRY_POLICY is metis.errors.RETRY_POLICY)\n"
        "try:\n"
        "    metis.telemetri\n"
        "except AttributeError as error:\n"
        "    print(error, error.__context__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    same, missing = done.stdout.splitlines()
    assert same == "True" and missing.endswith(" None")  # no import error chained
    assert missing.startswith(
        "module 'metis' has no attribute 'telemetri'; did you mean 'telemetry'"
    )
