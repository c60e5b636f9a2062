"""The include_usage stage: stream_options.include_usage on streamed OpenAI Chat calls."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from metis.errors import StackError
from metis.pipeline.registry import stages
from metis.pipeline.request import WireRequest
from metis.stages.edits.include_usage import IncludeUsage

from ..helpers import make_call


async def _drive(request: WireRequest) -> WireRequest:
    captured: list[WireRequest] = []

    async def inner(req: WireRequest, call: Any) -> Any:
        captured.append(req)
        yield "event"

    call: Any = make_call(provider="openai", model="openai:m")
    assert [e async for e in IncludeUsage()(request, call, inner)] == ["event"]
    return captured[0]


def _request(body: dict[str, Any], stream: bool) -> WireRequest:
    return WireRequest(url="https://api.openai.com/v1/chat/completions", body=body, stream=stream)


@pytest.mark.anyio
async def test_streaming_sets_include_usage() -> None:
    body = {"model": "gpt-4o", "stream": True, "messages": []}
    before = copy.deepcopy(body)
    sent = await _drive(_request(body, stream=True))
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["model"] == "gpt-4o"
    assert sent.stream is True
    assert body == before


@pytest.mark.anyio
async def test_existing_stream_options_kept() -> None:
    body = {"stream": True, "stream_options": {"include_obfuscation": False}}
    before = copy.deepcopy(body)
    sent = await _drive(_request(body, stream=True))
    assert sent.body["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert body == before


@pytest.mark.anyio
async def test_already_set_is_left_alone() -> None:
    request = _request({"stream": True, "stream_options": {"include_usage": True}}, stream=True)
    assert await _drive(request) is request


@pytest.mark.anyio
async def test_not_streaming_unchanged() -> None:
    request = _request({"model": "gpt-4o", "messages": []}, stream=False)
    sent = await _drive(request)
    assert sent is request
    assert "stream_options" not in sent.body


def test_takes_no_options() -> None:
    with pytest.raises(StackError, match="include_usage"):
        IncludeUsage(bogus=True)


def test_registered() -> None:
    assert stages.get("include_usage") is IncludeUsage
