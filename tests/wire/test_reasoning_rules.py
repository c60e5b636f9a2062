"""A reasoning effort sent to a model that does not reason (the catalog's ``reasoning:
false``: gpt-4o) is refused by OpenAI with a 400, in each API's own words: Chat Completions'
unrecognized argument, the Responses API's unsupported ``reasoning.effort``. One rule
(metis/wire/reasoning_rules.py) read by the client's ``pre_send_check`` and the emulator; the
client itself never sends it there (it drops the setting and says so)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.model.request import CanonicalRequest
from metis.testing.emulator import Emulator
from metis.wire.rules import openai_chat_problems, openai_responses_problems

HI = [{"role": "user", "content": "hi"}]
CHAT = "Unrecognized request argument supplied: reasoning_effort"
RESPONSES = "Unsupported parameter: 'reasoning.effort' is not supported with this model."


def _refused(path: str, body: dict[str, Any]) -> dict[str, Any]:
    with httpx.Client(transport=Emulator().transport(), base_url="http://emulator") as http:
        answer = http.post(path, json=body, headers={"authorization": "Bearer k"})
    assert answer.status_code == 400, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


@pytest.mark.parametrize("effort", ["low", "none"])
def test_chat_refuses_an_effort_for_a_model_without_reasoning(effort: str) -> None:
    body = {"model": "gpt-4o", "messages": HI, "reasoning_effort": effort}
    error = _refused("/v1/chat/completions", body)
    assert (error["message"], error["param"], error["code"]) == (CHAT, None, None)
    assert CHAT in openai_chat_problems(body)
    assert openai_chat_problems({**body, "model": "o3"}) == []
    assert openai_chat_problems({**body, "reasoning_effort": None}) == []
    assert openai_chat_problems({**body, "model": "not-in-the-catalog"}) == []


def test_responses_refuses_an_effort_for_a_model_without_reasoning() -> None:
    body = {"model": "gpt-4.1", "input": "hi", "reasoning": {"effort": "low"}}
    error = _refused("/v1/responses", body)
    assert error["param"] == "reasoning.effort" and error["code"] == "unsupported_parameter"
    assert error["message"] == RESPONSES
    body["input"] = HI
    assert f"reasoning.effort: {RESPONSES}" in openai_responses_problems(body)
    assert openai_responses_problems({**body, "model": "gpt-5"}) == []


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["openai", "openai_responses"])
async def test_metis_never_sends_it_there(stack: str) -> None:
    emulator = Emulator()
    adapter = build_adapter(stack, api_key="k", http_client=emulator.client())
    asked = CanonicalRequest(model="gpt-4o", messages=HI, thinking="high", max_output_tokens=50)
    reply = await adapter.complete(asked)
    sent = json.loads(emulator.requests[-1].body)
    assert "reasoning_effort" not in sent and "reasoning" not in sent
    assert [w.block_type for w in reply.warnings] == ["reasoning"]


def test_a_model_whose_reasoning_the_catalog_does_not_say_is_not_refused() -> None:
    """OpenAI's catalog lists gpt-oss-120b without saying whether it reasons: Cerebras and Groq
    serve it (and take its effort) under that name, at the Chat Completions path."""
    body = {"model": "gpt-oss-120b", "messages": HI, "reasoning_effort": "low"}
    assert openai_chat_problems(body) == []
    response = {"model": "gpt-oss-120b", "input": HI, "reasoning": {"effort": "low"}}
    assert openai_responses_problems(response) == []


@pytest.mark.backend_independent
@pytest.mark.anyio
async def test_cerebras_thinks_with_gpt_oss() -> None:
    emulator = Emulator(models="any")
    adapter = build_adapter("cerebras", api_key="k", http_client=emulator.client())
    asked = CanonicalRequest(
        model="gpt-oss-120b", messages=HI, thinking="high", max_output_tokens=50
    )
    await adapter.complete(asked)
    assert json.loads(emulator.requests[-1].body)["reasoning_effort"] == "high"
