"""The cache_control stage: Anthropic prompt-caching breakpoints on system and tools."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from metis.errors import StackError
from metis.pipeline.registry import stages
from metis.pipeline.request import WireRequest
from metis.stages.edits.cache_control import CacheControl

from ..helpers import make_call

EPHEMERAL = {"type": "ephemeral"}


def _call() -> Any:
    return make_call(provider="anthropic", model="anthropic:m")


def _request(body: dict[str, Any]) -> WireRequest:
    return WireRequest(url="https://api.anthropic.com/v1/messages", body=body, stream=True)


async def _drive(stage: CacheControl, request: WireRequest) -> WireRequest:
    captured: list[WireRequest] = []
    events = ["untouched"]

    async def inner(req: WireRequest, call: Any) -> Any:
        captured.append(req)
        for event in events:
            yield event

    out = [e async for e in stage(request, _call(), inner)]
    assert out == events
    return captured[0]


def _tools(n: int) -> list[dict[str, Any]]:
    return [
        {"name": f"t{i}", "input_schema": {"type": "object", "properties": {}}} for i in range(n)
    ]


def _marked(block: dict[str, Any]) -> int:
    return 1 if "cache_control" in block else 0


@pytest.mark.anyio
async def test_string_system_and_last_tool() -> None:
    body = {
        "model": "claude",
        "system": "You are terse.",
        "tools": _tools(3),
        "messages": [{"role": "user", "content": "hi"}],
    }
    before = copy.deepcopy(body)
    sent = (await _drive(CacheControl(), _request(body))).body
    assert sent["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]
    assert sent["tools"][-1]["cache_control"] == EPHEMERAL
    assert sent["tools"][:2] == before["tools"][:2]
    assert all("cache_control" not in t for t in sent["tools"][:2])
    assert sent["messages"] == before["messages"]
    assert body == before


@pytest.mark.anyio
async def test_block_system_marks_last_block() -> None:
    system = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    body = {"system": system, "messages": []}
    before = copy.deepcopy(body)
    sent = (await _drive(CacheControl(), _request(body))).body
    assert sent["system"][0] == {"type": "text", "text": "a"}
    assert sent["system"][1] == {"type": "text", "text": "b", "cache_control": EPHEMERAL}
    assert body == before


@pytest.mark.anyio
async def test_nothing_to_mark_leaves_request() -> None:
    request = _request({"system": "", "tools": [], "messages": []})
    assert await _drive(CacheControl(), request) is request
    request = _request({"messages": [{"role": "user", "content": "hi"}]})
    assert await _drive(CacheControl(), request) is request


@pytest.mark.anyio
async def test_existing_marker_on_last_block_kept() -> None:
    marker = {"type": "ephemeral", "ttl": "1h"}
    body = {
        "system": [{"type": "text", "text": "s", "cache_control": marker}],
        "tools": [{"name": "t", "cache_control": marker}],
    }
    request = _request(body)
    assert await _drive(CacheControl(), request) is request


@pytest.mark.anyio
async def test_ttl_option() -> None:
    sent = (
        await _drive(CacheControl(ttl="1h"), _request({"system": "s", "tools": _tools(1)}))
    ).body
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert sent["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


@pytest.mark.anyio
async def test_system_and_tools_options() -> None:
    body = {"system": "s", "tools": _tools(2)}
    sent = (await _drive(CacheControl(system=False), _request(body))).body
    assert sent["system"] == "s"
    assert sent["tools"][-1]["cache_control"] == EPHEMERAL

    sent = (await _drive(CacheControl(tools=False), _request(body))).body
    assert sent["system"][0]["cache_control"] == EPHEMERAL
    assert sent["tools"] == body["tools"]


def _messages_with_markers(n: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": f"m{i}", "cache_control": dict(EPHEMERAL)}],
        }
        for i in range(n)
    ]


def _count(body: dict[str, Any]) -> int:
    system = body.get("system")
    count = sum(_marked(b) for b in system) if isinstance(system, list) else 0
    count += sum(_marked(t) for t in body.get("tools", []))
    for m in body.get("messages", []):
        for block in m["content"]:
            count += _marked(block)
            if isinstance(block.get("content"), list):
                count += sum(_marked(b) for b in block["content"])
    return count


@pytest.mark.anyio
async def test_never_more_than_four_breakpoints(caplog: pytest.LogCaptureFixture) -> None:
    body = {"system": "s", "tools": _tools(2), "messages": _messages_with_markers(3)}
    with caplog.at_level(logging.DEBUG, logger="metis"):
        sent = (await _drive(CacheControl(), _request(body))).body
    assert _count(sent) == 4
    # With one breakpoint left, the system prompt gets it: its prefix includes the tools.
    assert sent["system"][0]["cache_control"] == EPHEMERAL
    assert sent["tools"] == body["tools"]
    debug = [r for r in caplog.records if r.name == "metis" and r.levelno == logging.DEBUG]
    assert len(debug) == 1
    assert "tool" in debug[0].getMessage()


@pytest.mark.anyio
async def test_full_request_is_left_alone() -> None:
    messages = _messages_with_markers(3)
    messages.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "x",
                    "content": [{"type": "text", "text": "r", "cache_control": EPHEMERAL}],
                }
            ],
        }
    )
    request = _request({"system": "s", "tools": _tools(1), "messages": messages})
    assert await _drive(CacheControl(), request) is request


@pytest.mark.anyio
async def test_five_minute_marker_not_placed_before_callers_hour_marker() -> None:
    hour = {"type": "ephemeral", "ttl": "1h"}
    messages = [{"role": "user", "content": [{"type": "text", "text": "m", "cache_control": hour}]}]
    request = _request({"system": "s", "tools": _tools(1), "messages": messages})
    assert await _drive(CacheControl(), request) is request
    sent = (await _drive(CacheControl(ttl="1h"), request)).body
    assert sent["system"][0]["cache_control"] == hour
    assert sent["tools"][0]["cache_control"] == hour


def test_unknown_option_names_the_stage() -> None:
    with pytest.raises(StackError, match="cache_control"):
        CacheControl(bogus=1)
    with pytest.raises(StackError, match="cache_control"):
        CacheControl(ttl="2h")


def test_registered() -> None:
    assert stages.get("cache_control") is CacheControl
