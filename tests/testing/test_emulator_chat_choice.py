"""Chat Completions' ``allowed_tools`` tool choice is taken, as OpenAI takes it: ``required``
makes the model call one of the tools, ``auto`` lets it answer."""

from __future__ import annotations

import httpx
import pytest

from metis.testing.emulator import Emulator

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.mark.parametrize(("mode", "finish"), [("required", "tool_calls"), ("auto", "stop")])
def test_allowed_tools_is_a_tool_choice(mode: str, finish: str) -> None:
    allowed = {"mode": mode, "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Hello there"}],
        "tools": [WEATHER],
        "tool_choice": {"type": "allowed_tools", "allowed_tools": allowed},
    }
    with httpx.Client(transport=Emulator().transport(), base_url="http://emulator") as client:
        answer = client.post(
            "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["finish_reason"] == finish


def test_required_allowed_tools_call_only_an_allowed_tool() -> None:
    time = {"type": "function", "function": {**WEATHER["function"], "name": "get_time"}}
    allowed = {
        "mode": "required",
        "tools": [{"type": "function", "function": {"name": "get_time"}}],
    }
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
        "tools": [WEATHER, time],
        "tool_choice": {"type": "allowed_tools", "allowed_tools": allowed},
    }
    with httpx.Client(transport=Emulator().transport(), base_url="http://emulator") as client:
        answer = client.post(
            "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}
        )
    calls = answer.json()["choices"][0]["message"]["tool_calls"]
    assert [call["function"]["name"] for call in calls] == ["get_time"]
