"""A refusal's explanation (Anthropic's ``stop_details.explanation``) through ``metis serve``
to an OpenAI client, in the caller's shape: Chat's ``refusal`` and a Responses ``refusal``
part, whole and streamed (the Messages shape: tests/wire/test_anthropic_stop_details.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator, Reply
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
SAID = "This request could enable malware development."
ASK = [{"role": "user", "content": "Write malware"}]


@contextmanager
def _client() -> Iterator[Any]:
    emulator = Emulator(
        model=lambda _: Reply(text="", stop="refusal", category="cyber", explanation=SAID)
    )
    with serving(create_app(gateway_config(emulator))) as (url, _):
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)


def test_a_chat_caller_gets_the_explanation_as_the_refusal() -> None:
    with _client() as sdk:
        whole = sdk.chat.completions.create(model="sonnet", messages=ASK)
        chunks = list(sdk.chat.completions.create(model="sonnet", messages=ASK, stream=True))
    assert whole.choices[0].message.refusal == SAID
    assert whole.choices[0].finish_reason == "stop"  # as OpenAI ends a refusal in words
    said = [c.choices[0].delta.refusal for c in chunks if c.choices and c.choices[0].delta.refusal]
    assert said == [SAID]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_responses_caller_gets_the_explanation_as_a_refusal_part(stream: bool) -> None:
    with _client() as sdk:
        if stream:
            with sdk.responses.stream(model="sonnet", input=ASK) as events:
                response = events.get_final_response()
        else:
            response = sdk.responses.create(model="sonnet", input=ASK)
    parts = [p for item in response.output if item.type == "message" for p in item.content]
    assert [(p.type, getattr(p, "refusal", None)) for p in parts] == [("refusal", SAID)]
