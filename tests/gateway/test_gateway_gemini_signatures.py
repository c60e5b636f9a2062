"""A Chat client's tool loop with Gemini 3 keeps the model's thought signatures: each call is
handed out with its signature (with its maker written in) as Gemini's OpenAI-compatible
endpoint gives it, ``extra_content.google.thought_signature``, whole and streamed, and a call
sent back with it gives Gemini its own signature again. The calls went out without it, and
Gemini got Google's bypass value in its place (which it takes at the cost of the model's
reasoning)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
BYPASS = "skip_thought_signature_validator"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": CITY}}]
ASKED: Any = [{"role": "user", "content": "What is the weather in Oslo?"}]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, Emulator]]:
    emulator = Emulator()
    three = {"gemini:gemini-3-pro-preview": {"adapter": "gemini", "aliases": ["g3"]}}
    with serving(create_app(gateway_config(emulator, models=three))) as (url, _):
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0), emulator


def _call_part(emulator: Emulator) -> dict[str, Any]:
    contents = emulator.bodies("gemini")[-1]["contents"]
    return next(p for c in contents for p in c["parts"] if "functionCall" in p)


def _answered(call: dict[str, Any]) -> list[Any]:
    return [
        *ASKED,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "cold"},
    ]


def test_a_call_s_signature_goes_back_to_gemini_through_a_chat_client(
    served: tuple[Any, Emulator],
) -> None:
    oai, emulator = served
    reply = oai.chat.completions.create(model="g3", messages=ASKED, tools=TOOLS)
    call = reply.choices[0].message.tool_calls[0].model_dump(exclude_none=True)
    sealed = call["extra_content"]["google"]["thought_signature"]
    assert sealed.startswith("metis1.")
    answer = oai.chat.completions.create(model="g3", messages=_answered(call), tools=TOOLS)
    assert answer.choices[0].message.content == "According to get_weather: cold."
    signature = _call_part(emulator)["thoughtSignature"]
    assert signature != BYPASS and sealed.endswith("." + signature)


def test_a_streamed_call_s_signature_goes_back_too(served: tuple[Any, Emulator]) -> None:
    """The signature comes on a fragment of its call before the finish; the openai SDK's
    stream helper gathers it onto the call."""
    oai, emulator = served
    with oai.chat.completions.stream(model="g3", messages=ASKED, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0].model_dump(exclude_none=True)
    call.pop("parsed_arguments", None), call.pop("index", None)  # the helper's own
    assert call["extra_content"]["google"]["thought_signature"].startswith("metis1.")
    raw = oai.chat.completions.with_raw_response.create(
        model="g3", messages=_answered(call), tools=TOOLS
    )
    assert raw.headers.get("x-metis-dropped") is None
    assert _call_part(emulator)["thoughtSignature"] not in (BYPASS, None)


def test_a_signature_the_gateway_did_not_give_goes_to_no_model_and_is_named(
    served: tuple[Any, Emulator],
) -> None:
    oai, emulator = served
    call = {
        "id": "tu_01JZZZZZZZZZZZZZZZZZZZZZZZ",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
        "extra_content": {"google": {"thought_signature": "c2lnbmVk"}},
    }
    raw = oai.chat.completions.with_raw_response.create(
        model="g3", messages=_answered(call), tools=TOOLS
    )
    assert "messages[1].tool_calls[0].extra_content" in raw.headers["x-metis-dropped"]
    assert _call_part(emulator)["thoughtSignature"] == BYPASS


def test_a_signature_goes_back_to_its_maker_alone(served: tuple[Any, Emulator]) -> None:
    """Sent to another Gemini model, the call goes as a foreign one (the bypass)."""
    oai, emulator = served
    reply = oai.chat.completions.create(model="g3", messages=ASKED, tools=TOOLS)
    call = reply.choices[0].message.tool_calls[0].model_dump(exclude_none=True)
    oai.chat.completions.create(model="flash", messages=_answered(call), tools=TOOLS)
    assert _call_part(emulator).get("thoughtSignature") in (BYPASS, None)
