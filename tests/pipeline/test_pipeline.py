"""The engine: assembly-time validation, editing by name, running and cleanup."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from metis.errors import StackError
from metis.model import CanonicalRequest, Message, MessageComplete, MessageStart, StreamEvent
from metis.model.content import TextBlock
from metis.model.events import TextDelta
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.pipeline.call import Call
from metis.pipeline.pipeline import Pipeline
from metis.pipeline.registry import StageRegistry
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import Inner, RequestStage, Stage
from metis.stacks.loader import parse_stack

from ..helpers import make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)


class FakeWire(Stage[CanonicalRequest, WireRequest, Any, Any]):
    """Stands in for encode: makes a WireRequest, leaves the items alone."""

    name = "fake_encode"

    def __call__(
        self, request: CanonicalRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> Any:
        return inner(WireRequest(url="http://x", body={"n": len(request.messages)}), call)


class FakeTransport(Stage[WireRequest, Any, Any, StreamEvent]):
    """A terminal stage answering every request with a fixed short message."""

    name = "fake_transport"
    terminal = True
    closed: list[str]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.seen: list[WireRequest] = []
        self.closed = []

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[StreamEvent]:
        self.seen.append(request)
        try:
            yield MessageStart("m1", "x")
            yield TextDelta(0, "hel")
            yield TextDelta(0, "lo")
            yield MessageComplete(
                [TextBlock(text="hello")], StopReason(kind=StopKind.END_TURN), TokenUsage()
            )
        finally:
            self.closed.append("transport")


class BytesTransport(Stage[WireRequest, Any, Any, bytes]):
    name = "bytes_transport"
    terminal = True

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[bytes]:
        yield b"{}"


class Upper(Stage[Any, Any, StreamEvent, StreamEvent]):
    name = "upper"

    async def __call__(
        self, request: Any, call: Call, inner: Inner[Any, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        async for event in inner(request, call):
            if isinstance(event, TextDelta):
                event.text = event.text.upper()
            yield event


class Tag(RequestStage[CanonicalRequest]):
    name = "tag"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        text: str = "tagged"

    options: Options

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        return request.model_copy(
            update={"messages": [*request.messages, Message.user(self.options.text)]}
        )


def request() -> CanonicalRequest:
    return CanonicalRequest(model="x", messages=[Message.user("hi")], max_output_tokens=10)


async def run(pipeline: Pipeline) -> list[StreamEvent]:
    async with pipeline.run(request(), make_call()) as events:
        return [e async for e in events]


# Validation ------------------------------------------------------------------------------


def test_a_stack_without_a_transport_is_refused_naming_the_innermost_stage() -> None:
    with pytest.raises(StackError, match=r"no transport.*'fake_encode'"):
        Pipeline([FakeWire()])


def test_a_terminal_stage_with_stages_inside_it_is_refused() -> None:
    with pytest.raises(StackError, match=r"'fake_transport' is terminal.*fake_encode"):
        Pipeline([FakeTransport(), FakeWire(), BytesTransport()])


def test_a_request_type_mismatch_names_the_stage_and_both_types() -> None:
    # FakeTransport takes a WireRequest; with no encoder above it, it gets a CanonicalRequest.
    with pytest.raises(
        StackError, match=r"'fake_transport' takes WireRequest.*hands over CanonicalRequest"
    ):
        Pipeline([Upper(), FakeTransport()])


def test_an_item_type_mismatch_names_the_stage_and_the_producer() -> None:
    with pytest.raises(
        StackError, match=r"'upper' expects StreamEvent.*'bytes_transport' yields bytes"
    ):
        Pipeline([Upper(), FakeWire(), BytesTransport()])


def test_a_stack_that_never_yields_canonical_events_is_refused() -> None:
    with pytest.raises(StackError, match=r"is a 'normalize' stage missing"):
        Pipeline([FakeWire(), BytesTransport()])


def test_two_stages_with_one_name_are_refused() -> None:
    with pytest.raises(StackError, match=r"two stages are named 'upper'"):
        Pipeline([Upper(), Upper(), FakeWire(), FakeTransport()])


def test_an_unknown_option_names_the_stage_and_its_options() -> None:
    expected = r"stage 'tag': unknown option 'colour'.*its options: text"
    with pytest.raises(StackError, match=expected):
        Tag(colour="red")


def test_pass_through_stages_do_not_break_item_typing() -> None:
    pipeline = Pipeline([Tag(), Upper(), FakeWire(), FakeTransport()])
    assert pipeline.names() == ["tag", "upper", "fake_encode", "fake_transport"]


# Running ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_request_travels_in_and_events_travel_out() -> None:
    transport = FakeTransport()
    pipeline = Pipeline([Tag(), Upper(), FakeWire(), transport])
    events = await run(pipeline)
    assert [e.type for e in events] == [
        "message.start",
        "text.delta",
        "text.delta",
        "message.complete",
    ]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["HEL", "LO"]
    assert transport.seen[0].body == {"n": 2}  # Tag added a message before encoding


@pytest.mark.anyio
async def test_leaving_early_closes_every_stage_down_to_the_transport() -> None:
    transport = FakeTransport()
    pipeline = Pipeline([Upper(), FakeWire(), transport])
    async with pipeline.run(request(), make_call()) as events:
        async for _ in events:
            break
        assert transport.closed == []
    assert transport.closed == ["transport"]


# Editing ---------------------------------------------------------------------------------


def test_insert_replace_remove_by_name() -> None:
    pipeline = Pipeline([Upper(), FakeWire(), FakeTransport()])
    pipeline.insert_before("upper", Tag())
    assert pipeline.names() == ["tag", "upper", "fake_encode", "fake_transport"]
    pipeline.remove("tag").insert_after("fake_encode", _Noop())
    assert pipeline.names() == ["upper", "fake_encode", "noop", "fake_transport"]
    replacement = Tag(text="other")
    pipeline.remove("noop").replace("upper", replacement)
    assert pipeline["tag"] is replacement


def test_an_edit_that_breaks_the_stack_is_refused_and_leaves_it_as_it_was() -> None:
    pipeline = Pipeline([Upper(), FakeWire(), FakeTransport()])
    with pytest.raises(StackError, match=r"no transport"):
        pipeline.remove("fake_transport")
    assert pipeline.names() == ["upper", "fake_encode", "fake_transport"]


def test_editing_an_unknown_name_lists_the_stages() -> None:
    pipeline = Pipeline([Upper(), FakeWire(), FakeTransport()])
    expected = r"no stage 'tool_ids'; its stages are: upper, fake_encode"
    with pytest.raises(StackError, match=expected):
        pipeline.insert_after("tool_ids", Tag())


@pytest.mark.anyio
async def test_a_call_already_running_keeps_the_stack_it_began_with() -> None:
    pipeline = Pipeline([Upper(), FakeWire(), FakeTransport()])
    async with pipeline.run(request(), make_call()) as events:
        first = await events.__anext__()
        pipeline.remove("upper")
        rest = [e async for e in events]
    assert first.type == "message.start"
    assert [e.text for e in rest if isinstance(e, TextDelta)] == ["HEL", "LO"]
    assert [e.text for e in await run(pipeline) if isinstance(e, TextDelta)] == ["hel", "lo"]


class _Noop(RequestStage[WireRequest]):
    name = "noop"

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        return request


# Stacks from YAML with user stages -------------------------------------------------------


def test_a_yaml_stack_can_name_user_stages_with_options() -> None:
    registry = StageRegistry()
    for cls in (Tag, Upper, FakeWire, FakeTransport):
        registry.register(cls)
    spec = parse_stack(
        {
            "name": "toy",
            "endpoint": {"base_url": "http://x", "path": "/"},
            "stages": [{"tag": {"text": "hey"}}, "upper", "fake_encode", "fake_transport"],
        },
        source="toy.yaml",
    )
    pipeline = spec.build_pipeline(registry)
    assert pipeline.names() == ["tag", "upper", "fake_encode", "fake_transport"]
    assert pipeline["tag"].options.text == "hey"  # type: ignore[attr-defined]


def test_a_yaml_stack_naming_an_unknown_stage_says_where() -> None:
    registry = StageRegistry()
    registry.register(Upper)
    spec = parse_stack(
        {"name": "toy", "endpoint": {"base_url": "x", "path": "/"}, "stages": ["upper", "nope"]},
        source="toy.yaml",
    )
    with pytest.raises(StackError, match=r"toy.yaml: stages\[1\]: unknown stage 'nope'"):
        spec.build_pipeline(registry)


def test_a_yaml_stack_with_a_bad_option_says_which_stage() -> None:
    registry = StageRegistry()
    registry.register(Tag)
    spec = parse_stack(
        {
            "name": "toy",
            "endpoint": {"base_url": "x", "path": "/"},
            "stages": [{"tag": {"txt": 1}}],
        },
        source="toy.yaml",
    )
    with pytest.raises(
        StackError, match=r"toy.yaml: stages\[0\]: stage 'tag': unknown option 'txt'"
    ):
        spec.build_pipeline(registry)


def test_stage_signatures_come_from_the_type_parameters() -> None:
    sig = Tag.signature()
    assert sig.request_in is CanonicalRequest and sig.request_out is CanonicalRequest
    assert sig.items_in is Any and sig.items_out is Any
    assert FakeWire.signature().request_out is WireRequest
