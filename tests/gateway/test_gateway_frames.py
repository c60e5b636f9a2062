"""A Messages request's frame (all but its turns) read once per content, and its canonical
request planned once per model and capabilities (metis/gateway/frames.py): a request given a
kept frame's plan is the request the reader and the projection make of it alone, never
another frame's, never one whose capabilities changed, with its own copy of every part a
stage may edit in place; a bad setting is refused each time, after a bad turn."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.gateway import anthropic_api, frames
from metis.gateway.config import GatewayConfig
from metis.gateway.prepared import Prepared
from metis.gateway.service import Gateway

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("kept_from_first_read")]

CONFIG = {
    "adapters": {
        "chat": {"type": "openai", "base_url": "http://127.0.0.1:9", "api_key_env": "K"},
        "claude": {"type": "anthropic", "base_url": "http://127.0.0.1:9", "api_key_env": "K"},
    },
    "models": {
        "openai:gpt-4o": {"adapter": "chat", "aliases": ["gpt"]},
        "anthropic:claude-sonnet-4-5": {"adapter": "claude", "aliases": ["sonnet"]},
    },
    "gateway": {},
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
BODY: dict[str, Any] = {
    "model": "gpt",
    "stream": True,
    "max_tokens": 1024,
    "system": "Be brief.",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": SCHEMA}],
    "tool_choice": {"type": "auto"},
    "temperature": 0.5,
    "top_k": 3,
    "stop_sequences": ["END"],
    "output_format": {"type": "json_schema", "schema": {"type": "object"}},
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "metadata": {"user_id": "u"},
}


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    frames.clear()
    yield Gateway(GatewayConfig.from_dict(copy.deepcopy(CONFIG), environ={"K": "k"}))
    frames.clear()


@pytest.fixture
def unframed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Reads each body as the reader and the projection do with no frame kept."""

    def alone(body: Any, read: Any) -> frames.Frame:
        return dataclasses.replace(read(body), kept=False)

    def use() -> None:
        monkeypatch.setattr(anthropic_api, "framed", alone)

    return use


async def _prepare(gateway: Gateway, body: dict[str, Any]) -> Prepared:
    return await gateway.prepare("anthropic", copy.deepcopy(body), "")


def _same(a: Prepared, b: Prepared) -> None:
    assert a.request.request_id != b.request.request_id
    exclude = {"request_id"}
    assert a.request.model_dump(exclude=exclude) == b.request.model_dump(exclude=exclude)
    assert a.request.messages == b.request.messages
    assert a.dropped == b.dropped and a.reported == b.reported
    assert (a.inbound.stream, a.inbound.options) == (b.inbound.stream, b.inbound.options)


@pytest.mark.parametrize("model", ["gpt", "sonnet"])
async def test_a_kept_frame_gives_the_request_read_alone(
    gateway: Gateway, unframed: Any, model: str
) -> None:
    body = {**BODY, "model": model}
    first, again = await _prepare(gateway, body), await _prepare(gateway, body)
    assert again.inbound.frame is first.inbound.frame is not None
    unframed()
    alone = await _prepare(gateway, body)
    assert alone.inbound.frame is None
    _same(first, alone)
    _same(again, alone)
    if model == "gpt":  # the projection ran for the plan: what it left out is said each time
        assert any("thinking" in d for d in again.dropped)
    assert again.request.tools[0].input_schema == SCHEMA
    assert again.request.stop_sequences == ["END"] and again.request.temperature == 0.5


async def test_another_frame_is_never_given_a_kept_one(gateway: Gateway, unframed: Any) -> None:
    await _prepare(gateway, BODY)
    others = [
        {**BODY, "temperature": 1},  # 1 is not 0.5, nor 1.0
        {**BODY, "temperature": 1.0},
        {**BODY, "max_tokens": 100},
        {**BODY, "stream": False},
        {**BODY, "tools": [{**BODY["tools"][0], "name": "get_time"}]},
        {k: v for k, v in BODY.items() if k != "thinking"},
        {**BODY, "messages": [{"role": "user", "content": "Other"}], "system": "Other."},
    ]
    made = [await _prepare(gateway, body) for body in others]
    unframed()
    for body, got in zip(others, made, strict=True):
        _same(got, await _prepare(gateway, body))
    assert made[0].request.temperature == 1.0 and made[2].request.max_output_tokens == 100
    assert made[-1].inbound.frame is made[-1].inbound.frame  # turns apart: the same frame
    assert made[-1].request.messages[-1].content[0].text == "Other"  # type: ignore[union-attr]


async def test_each_request_has_its_own_lists_and_the_same_tools(gateway: Gateway) -> None:
    first = await _prepare(gateway, BODY)
    first.request.stop_sequences.append("STOP")
    assert first.request.output_schema is not None
    first.request.output_schema["type"] = "array"
    first.request.messages.clear()
    again = await _prepare(gateway, BODY)
    assert again.request.tools[0] is first.request.tools[0]  # its schema's forms made once
    assert again.request.tools[0].input_schema == SCHEMA
    assert again.request.stop_sequences == ["END"]
    assert again.request.output_schema == {"type": "object"}
    assert len(again.request.messages) == 2  # the system prompt and the turn
    again.request.tools.clear()
    again.request.provider_options["openai"] = {"x": 1}
    third = await _prepare(gateway, BODY)
    assert len(third.request.tools) == 1 and third.request.provider_options == {}


async def test_capabilities_changed_are_planned_anew(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _prepare(gateway, BODY)
    assert first.request.max_output_tokens == 1024 and not first.dropped[:-1]
    narrowed = first.target.capabilities.model_copy(update={"max_output_tokens": 512})
    adapter: Any = first.target.chat_model  # refined, as an adapter's lifespan may
    monkeypatch.setattr(adapter, "capabilities_for", lambda wire_model: narrowed)
    again = await _prepare(gateway, BODY)
    assert again.target.capabilities is narrowed
    assert again.inbound.frame is first.inbound.frame
    assert again.request.max_output_tokens == 512
    assert "max_tokens lowered from 1024 to 512" in again.dropped


async def test_a_bad_setting_is_refused_every_time_after_a_bad_turn(gateway: Gateway) -> None:
    bad = {**BODY, "temperature": -1}
    for _ in range(2):
        with pytest.raises(InvalidRequestError, match="temperature"):
            await _prepare(gateway, bad)
    both = {**bad, "messages": [{"role": "robot", "content": "Hi"}]}
    with pytest.raises(InvalidRequestError) as caught:
        await _prepare(gateway, both)
    assert "temperature" not in str(caught.value)


async def test_a_server_tool_is_read_with_its_request(gateway: Gateway) -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    body = {**BODY, "tools": [*BODY["tools"], search]}
    first, again = await _prepare(gateway, body), await _prepare(gateway, body)
    assert first.inbound.frame is None and again.inbound.frame is None
    assert first.inbound.options == again.inbound.options


def test_the_frames_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    frames.clear()
    monkeypatch.setattr(frames, "FRAMES_AT_MOST", 3)
    for n in range(5):
        anthropic_api.read_messages({**BODY, "max_tokens": n + 1})
    assert len(frames._FRAMES) == 3
    frames.clear()
