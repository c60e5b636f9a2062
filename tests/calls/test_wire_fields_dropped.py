"""A setting a stack's ``wire_fields`` ``drop`` leaves out of the body is reported dropped with
the call's result when the caller set it (docs/contract.md §13), once; a field metis itself
fills (the model, Vertex's server-tool switch) is left out quietly."""

from __future__ import annotations

import dataclasses

import pytest

from metis.model import CanonicalRequest, Message
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.stages.edits.wire_fields import WireFields
from metis.testing.emulator import tools

from ..conversations import TOOLS, adapters_for, scripted
from ..helpers import answer

CALL = tools(("get_weather", {"city": "Paris"}))
DROPPING = ["deepseek", "zai", "cerebras", "minimax"]  # perplexity: no tools, so never set


def _request(stack: str, **fields: object) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{stack}:m",
        messages=[Message.user("Weather in Paris?")],
        tools=TOOLS,
        max_output_tokens=256,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize("stack", DROPPING)
async def test_a_set_field_the_stack_drops_is_reported_once(stack: str, streaming: bool) -> None:
    adapter = adapters_for(scripted([CALL]), stack)[stack]
    response = await answer(adapter, _request(stack, parallel_tool_calls=False), streaming)
    dropped = [w for w in response.warnings if w.block_type == "parallel_tool_calls"]
    assert [(w.provider, w.message_id) for w in dropped] == [(stack, None)]
    assert "does not take" in dropped[0].reason


@pytest.mark.anyio
@pytest.mark.parametrize("stack", DROPPING)
async def test_an_unset_field_is_not_reported(stack: str) -> None:
    adapter = adapters_for(scripted([CALL]), stack)[stack]
    response = await answer(adapter, _request(stack), False)
    assert [w.block_type for w in response.warnings] == []


def _call() -> Call:
    return Call(request_id="r", provider="p", model="m", wire_model="m")


def _wire(body: dict[str, object]) -> WireRequest:
    return WireRequest(url="http://x", body=body)


def test_every_kind_of_path_is_reported_by_the_name_the_stack_gave() -> None:
    stage = WireFields(drop=["seed", "tools.*.function.strict", "extra.inner"])
    body = {
        "seed": 3,
        "tools": [{"function": {"name": "a", "strict": True}}, {"function": {"name": "b"}}],
        "extra": {"inner": 1},
    }
    call = _call()
    out = stage.rewrite(_wire(body), call)
    assert out.body == {
        "tools": [{"function": {"name": "a"}}, {"function": {"name": "b"}}],
        "extra": {},
    }
    names = [w.block_type for w in call.warnings]
    assert names == ["seed", "tools.*.function.strict", "extra.inner"]


def test_a_path_matching_nothing_reports_nothing() -> None:
    stage = WireFields(drop=["seed", "tools.*.function.strict"])
    call = _call()
    request = _wire({"tools": [{"function": {"name": "a"}}]})
    assert stage.rewrite(request, call) is request
    assert call.warnings == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("model", {"model": "m", "messages": []}),
        (
            "toolConfig.includeServerSideToolInvocations",
            {"toolConfig": {"includeServerSideToolInvocations": True}},
        ),
        ("stream_options", {"stream_options": {"include_usage": True}}),
    ],
)
def test_a_field_metis_fills_is_dropped_quietly(path: str, body: dict[str, object]) -> None:
    call = _call()
    out = WireFields(drop=[path]).rewrite(_wire(body), call)
    assert out.body != body
    assert call.warnings == []
    assert dataclasses.is_dataclass(out)
