"""Claude Opus from 5.5, Fable and Mythos from 5.1 refuse a forced tool choice (``tool_choice``
``any`` or a named tool): a 400 "tool_choice: type "tool" and "any" are not supported for this
model." (Anthropic's Opus 5.5 page, "Forced tool use returns an error", also on Fable 5.1;
the words quoted in can1357/oh-my-pi#12939 and anthropics/claude-cookbooks#854; on Bedrock,
vercel/ai#21364). metis refuses it before sending, a CapabilityError as for any need a model
cannot meet; the gateway leaves it out and names it, as it does every setting the routed model
cannot honour; the emulator refuses it in Anthropic's words."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis.catalog.capabilities import uncatalogued_capabilities
from metis.catalog.knobs import setting_rules
from metis.catalog.model_info import ModelInfo
from metis.errors import CapabilityError
from metis.gateway.anthropic_api import read_messages
from metis.gateway.projection import project
from metis.model import CanonicalRequest, Message, ToolChoice
from metis.stacks.loader import load_stack
from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.knobs_rules import FORCED

from .. import stack_table as platforms

pytestmark = pytest.mark.backend_independent

REFUSING = {
    "anthropic": "anthropic:claude-opus-5-5",
    "bedrock_anthropic": "bedrock_anthropic:global.anthropic.claude-fable-5-1-v1:0",
    "vertex_anthropic": "vertex_anthropic:claude-opus-5-5",
    "bedrock": "bedrock:global.anthropic.claude-opus-5-5",
}


def _forcing(model: str, choice: ToolChoice) -> CanonicalRequest:
    return CanonicalRequest(
        model=model,
        messages=[Message.user("Weather in Paris?")],
        tools=[platforms.WEATHER.model_copy(update={"name": "f"})],
        tool_choice=choice,
        max_output_tokens=2000,
    )


@pytest.mark.parametrize(
    ("model", "refuses"),
    [
        ("claude-opus-5-5", True),
        ("claude-fable-5-1", True),
        ("claude-mythos-5-1", True),
        ("us.anthropic.claude-opus-5-5-v1:0", True),
        ("claude-opus-5", False),
        ("claude-fable-5", False),  # Fable 5 takes it: the change came with 5.1
        ("claude-sonnet-4-5", False),
        ("gpt-5", False),
    ],
)
def test_the_catalog_knows_which_models_refuse_forcing(model: str, refuses: bool) -> None:
    rules = setting_rules(ModelInfo(provider="anthropic", id=model))
    assert (rules is not None and rules.refuses_forced_tool_choice) is refuses


@pytest.mark.anyio
@pytest.mark.parametrize("stack", sorted(REFUSING))
@pytest.mark.parametrize(
    "choice", [ToolChoice(type="any"), ToolChoice(type="tool", name="get_weather")]
)
async def test_a_forced_tool_choice_is_refused_before_sending(
    emulator: Emulator, stack: str, choice: ToolChoice
) -> None:
    adapter = platforms.adapter(stack, emulator)
    with pytest.raises(CapabilityError, match="tool use was forced"):
        await adapter.complete(_forcing(REFUSING[stack], choice))
    assert emulator.requests == []


@pytest.mark.anyio
async def test_auto_and_none_go_and_forcing_goes_to_a_model_that_takes_it(
    emulator: Emulator,
) -> None:
    adapter = platforms.adapter("anthropic", emulator)
    await adapter.complete(_forcing("anthropic:claude-opus-5-5", ToolChoice(type="auto")))
    await adapter.complete(_forcing("anthropic:claude-opus-5", ToolChoice(type="any")))
    sent = [body["tool_choice"]["type"] for body in emulator.bodies("anthropic")]
    assert sent == ["auto", "any"]


def _post(emulator: Emulator, model: str, choice: dict[str, Any]) -> httpx.Response:
    body = {
        "model": model,
        "max_tokens": 2000,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "tool_choice": choice,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    return httpx.post(f"{emulator.base_url('anthropic')}/v1/messages", json=body, headers=headers)


def test_the_emulator_refuses_forcing_in_anthropics_words(emulator: Emulator) -> None:
    refused = _post(emulator, "claude-fable-5-1", {"type": "tool", "name": "get_weather"})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == FORCED
    assert _post(emulator, "claude-opus-5-5", {"type": "any"}).status_code == 400
    assert _post(emulator, "claude-opus-5-5", {"type": "auto"}).status_code == 200
    assert _post(emulator, "claude-opus-5", {"type": "any"}).status_code == 200


def test_the_emulator_refuses_forcing_on_converse(emulator: Emulator) -> None:
    def converse(model: str, choice: dict[str, Any]) -> httpx.Response:
        body = {
            "messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}],
            "toolConfig": {
                "tools": [{"toolSpec": {"name": "w", "inputSchema": {"json": {"type": "object"}}}}],
                "toolChoice": choice,
            },
        }
        url = f"{emulator.base_url('bedrock')}/model/{model}/converse"
        return httpx.post(url, json=body, headers={"authorization": "Bearer k"})

    refused = converse("global.anthropic.claude-opus-5-5", {"any": {}})
    assert refused.status_code == 400 and refused.json()["message"] == FORCED
    assert converse("global.anthropic.claude-opus-5-5", {"auto": {}}).status_code == 200


def test_the_gateway_leaves_a_forced_choice_out_and_names_it() -> None:
    caps = uncatalogued_capabilities(
        load_stack("anthropic").capabilities, "anthropic", "claude-opus-5-5"
    )
    body = {
        "model": "claude-opus-5-5",
        "max_tokens": 2000,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    _, changes, dropped = project(read_messages(body), caps, "claude-opus-5-5")
    assert changes["tool_choice"] is None
    assert dropped == ["tool_choice any (the model refuses forced tool use)"]
    body["tool_choice"] = {"type": "auto"}
    assert project(read_messages(body), caps, "claude-opus-5-5")[2] == []
