"""o1-mini and o1-preview take no system or developer message on Chat: the instructions open
the first user message (pydantic/pydantic-ai's test_openai_o1_mini_system_role[system] and
[developer] cassettes: 400 from OpenAI; the emulator refuses them in the same words)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis.model.content import ImageBlock, Message
from metis.model.request import CanonicalRequest
from metis.testing.emulator import Emulator
from metis.wire.openai_chat import OpenAIChatCodec

from .test_codec_wire_shapes import PlainContext

KEY = {"authorization": "Bearer test"}
PNG = ImageBlock.from_url("https://example.com/a.png")


def _encoded(wire_model: str, *messages: Message, system: str | None = "Be brief.") -> Any:
    context = PlainContext(wire_model=wire_model)
    request = CanonicalRequest(
        model=f"openai:{wire_model}",
        messages=list(messages),
        system_prompt=system,
        max_output_tokens=100,
    )
    return OpenAIChatCodec().encode(request, context), context


@pytest.mark.parametrize("model", ["o1-mini", "o1-preview-2024-09-12", "openai/o1-mini"])
def test_the_system_prompt_opens_the_first_user_message(model: str) -> None:
    body, context = _encoded(model, Message.user("Hi"), Message.assistant("Yes?"))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][0]["content"] == "Be brief.\n\nHi"
    assert context.dropped == ["system prompt"]
    body, _ = _encoded(model, Message.user("What is it?", PNG))
    first = body["messages"][0]["content"]
    assert first[0] == {"type": "text", "text": "Be brief."} and len(first) == 3


def test_a_model_that_takes_a_system_message_keeps_it() -> None:
    for model in ("o1", "gpt-4o-mini", "o3-mini"):
        body, context = _encoded(model, Message.user("Hi"))
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert context.dropped == []


def test_the_emulator_answers_what_the_codec_sends() -> None:
    emulator = Emulator()
    with httpx.Client(
        transport=emulator.transport(), base_url="https://api.openai.com", headers=KEY
    ) as http:
        body, _ = _encoded("o1-mini", Message.user("Hi"))
        assert http.post("/v1/chat/completions", json=body).status_code == 200
        sent = {**body, "messages": [{"role": "system", "content": "Be brief."}, *body["messages"]]}
        assert http.post("/v1/chat/completions", json=sent).status_code == 400
