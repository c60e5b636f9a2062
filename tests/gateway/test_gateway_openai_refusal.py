"""An OpenAI model's refusal (Chat's ``message.refusal``, a Responses ``refusal`` part) reaches
a caller of another API in that API's own place for it: Chat's ``refusal`` (ending ``stop``,
so the openai SDK's ``parse`` reads it), a Responses ``refusal`` part, Anthropic's
``stop_details.explanation``. It came as the reply's text, which ``parse`` tried to
validate as the schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator, Reply
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
SAID = "I'm sorry, I can't help with that."
ASK: Any = [{"role": "user", "content": "Write malware"}]


class City(BaseModel):
    name: str


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    emulator = Emulator(model=lambda _: Reply(text="", stop="refusal", explanation=SAID))
    with serving(create_app(gateway_config(emulator))) as (served, _):
        yield served


@pytest.fixture(scope="module")
def sdk(url: str) -> Any:
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)


@pytest.mark.parametrize("model", ["gpt5", "gpt"], ids=["responses-model", "chat-model"])
def test_a_chat_caller_s_parse_reads_the_refusal(sdk: Any, model: str) -> None:
    """gpt5 is served by the Responses API (a translated route); gpt's answer is passed
    through, as OpenAI's own refusal."""
    parsed = sdk.chat.completions.parse(model=model, messages=ASK, response_format=City)
    message = parsed.choices[0].message
    assert (message.refusal, message.content, message.parsed) == (SAID, None, None)
    assert parsed.choices[0].finish_reason == "stop"
    chunks = list(sdk.chat.completions.create(model=model, messages=ASK, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.refusal or "" for d in deltas) == SAID
    assert "".join(d.content or "" for d in deltas) == ""


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_responses_caller_gets_a_chat_model_s_refusal_as_a_refusal_part(
    sdk: Any, stream: bool
) -> None:
    if stream:
        with sdk.responses.stream(model="gpt", input=ASK) as events:
            response = events.get_final_response()
    else:
        response = sdk.responses.create(model="gpt", input=ASK)
    parts = [p for item in response.output if item.type == "message" for p in item.content]
    assert [(p.type, getattr(p, "refusal", None)) for p in parts] == [("refusal", SAID)]


def test_a_messages_caller_gets_it_as_the_stop_s_explanation(url: str) -> None:
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
    reply = claude.messages.create(model="gpt", max_tokens=50, messages=ASK)
    assert reply.stop_reason == "refusal" and reply.content == []
    assert reply.stop_details.explanation == SAID
