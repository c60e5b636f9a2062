"""A reasoning model served on a stack that returns no reasoning text (gpt-5 on Chat
Completions, the ``openai`` stack) still takes a reasoning effort: a Responses client's
``reasoning.effort`` and an Anthropic client's thinking reach it as ``reasoning_effort``, as
the library's own call sends them, with nothing named in ``x-metis-dropped``. (The gateway
left them out as "thinking (the model does not think aloud)", where ``metis.complete`` sent
them.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
ON_CHAT = {"openai:gpt-5": {"adapter": "openai", "aliases": ["gpt5chat"]}}


@pytest.fixture(scope="module")
def url(emulator: Emulator) -> Iterator[str]:
    with serving(create_app(gateway_config(emulator, models=ON_CHAT))) as (served, _):
        yield served


def test_a_responses_effort_reaches_gpt5_on_chat(url: str, emulator: Emulator) -> None:
    client = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
    raw = client.responses.with_raw_response.create(
        model="gpt5chat", input="Hi", reasoning={"effort": "low"}
    )
    assert raw.headers.get("x-metis-dropped") is None
    assert emulator.bodies("openai")[-1]["reasoning_effort"] == "low"
    assert raw.parse().output_text == "You said: Hi"


def test_an_anthropic_clients_thinking_reaches_gpt5_on_chat(url: str, emulator: Emulator) -> None:
    client: Any = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="gpt5chat",
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "Hi"}],
    )
    assert raw.headers.get("x-metis-dropped") is None
    assert "reasoning_effort" in emulator.bodies("openai")[-1]
