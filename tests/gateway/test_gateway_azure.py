"""An Azure OpenAI deployment behind the gateway, its streams carrying Azure's content filter
verdicts (a first chunk of the prompt's, with no choices, id or model; then each choice's):
passed through to a Chat Completions client as Azure sent them, and translated for an Anthropic
client, through the official SDKs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
anthropic = ImportOnUse("anthropic")
HI = [{"role": "user", "content": "Hi"}]


@contextmanager
def _gateway() -> Iterator[str]:
    emulator = Emulator()
    adapter = {"type": "azure", "api_key_env": "AZURE_KEY", "max_retries": 0}
    adapter.update(base_url=emulator.base_url("azure"), settings={"resource": "res"})
    data = {
        "adapters": {"azure": adapter},
        "models": {"azure:my-gpt-4o": {"adapter": "azure", "aliases": ["deployed"]}},
        "gateway": {"api_key_env": "GATEWAY_KEY"},
    }
    environ = {"AZURE_KEY": "az-key", "GATEWAY_KEY": GATEWAY_KEY}
    config = GatewayConfig.from_dict(data, environ=environ, clients={"azure": emulator.client()})
    with serving(create_app(config)) as (url, _):
        yield url


def test_a_chat_stream_passes_the_filter_verdicts_through() -> None:
    with _gateway() as url:
        sdk = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)
        chunks = list(
            sdk.chat.completions.create(
                model="deployed",
                messages=HI,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert chunks[0].choices == [] and chunks[0].model_extra["prompt_filter_results"]
    with_choices = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in with_choices) == "You said: Hi"
    assert all("content_filter_results" in c.choices[0].model_extra for c in with_choices)
    assert {c.model for c in with_choices} == {"deployed"}
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


@pytest.mark.parametrize("streamed", [True, False])
def test_an_anthropic_client_reads_an_azure_deployment(streamed: bool) -> None:
    with _gateway() as url:
        sdk = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        if streamed:
            with sdk.messages.stream(model="deployed", max_tokens=50, messages=HI) as stream:
                message = stream.get_final_message()
        else:
            message = sdk.messages.create(model="deployed", max_tokens=50, messages=HI)
    assert message.content[0].text == "You said: Hi"
    assert message.stop_reason == "end_turn" and message.model == "deployed"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
