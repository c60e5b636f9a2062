"""Stages receive their adapter's objects when the adapter builds them; a call is its identity."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import StackError
from metis.model import CanonicalRequest, Message, MessageComplete, StreamEvent
from metis.model.content import ToolUseBlock
from metis.model.events import ToolUseEnd, ToolUseInputDelta, ToolUseStart
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Stage
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.tool_ids import ToolIds
from metis.telemetry import ListSink
from metis.transport.stage import Transport

from ..helpers import bound, drive, make_call


class Remembers(Stage[Any, Any, StreamEvent, StreamEvent]):
    name = "remembers"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.services: list[StageServices] = []

    def bind(self, services: StageServices) -> None:
        self.services.append(services)


def adapter() -> Any:
    return build_adapter("anthropic", api_key="k", base_url="http://127.0.0.1:9")


def test_a_call_carries_its_identity_and_nothing_else() -> None:
    fields = {f.name for f in dataclasses.fields(Call)}
    assert fields == {
        "request_id",
        "provider",
        "model",
        "wire_model",
        "session_id",
        "attempt",
        "cancel",
        "deadline",
        "drops",
        "terms",  # what a router settled for the call: its retries, its capability verdict
        "seen",  # the record of the request's messages, looked up once per call (history())
    }


def test_the_adapter_binds_its_own_copies_of_the_stages_it_is_given() -> None:
    first = adapter()
    store, sink = InMemoryToolIdStore(), ListSink()
    config = AdapterConfig(api_key="k", base_url="http://127.0.0.1:9", max_retries=5)
    second = type(first)(
        first.stack, config, pipeline=first.pipeline, tool_id_store=store, telemetry=sink
    )
    assert all(a is not b for a, b in zip(first.pipeline, second.pipeline, strict=True))
    assert first.pipeline["retry"]._max_retries == first.config.max_retries  # type: ignore[attr-defined]
    assert second.pipeline["retry"]._max_retries == 5  # type: ignore[attr-defined]
    assert second.pipeline["tool_ids"]._store is store  # type: ignore[attr-defined]
    assert second.pipeline["telemetry"]._sink is sink  # type: ignore[attr-defined]
    assert first.pipeline["tool_ids"]._store is first.tool_id_store  # type: ignore[attr-defined]


def test_a_stage_inserted_later_is_bound_as_it_arrives_and_rebound_on_change() -> None:
    built = adapter()
    stage = Remembers()
    built.pipeline.insert_after("invariants", stage)
    assert [s.provider for s in stage.services] == ["anthropic"]
    assert stage.services[0].endpoint is built.endpoint
    sink = ListSink()
    built.telemetry = sink
    assert stage.services[-1].telemetry is sink
    assert built.pipeline["telemetry"]._sink is sink  # type: ignore[attr-defined]
    store = InMemoryToolIdStore()
    built.tool_id_store = store
    assert built.pipeline["tool_ids"]._store is store  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_an_unbound_transport_says_it_has_no_client() -> None:
    wire = WireRequest(url="http://127.0.0.1:9/v1", body={}, stream=True)
    with pytest.raises(StackError, match="no HTTP client"):
        async for _ in Transport()(wire, make_call(), None):  # type: ignore[arg-type]
            pass


@pytest.mark.anyio
async def test_an_unbound_tool_ids_stage_says_it_has_no_store() -> None:
    request = CanonicalRequest(
        model="anthropic:claude-x",
        messages=[Message.user("hi")],
        max_output_tokens=10,
        session_id="s1",
    )
    with pytest.raises(StackError, match="no tool-id store"):
        done = MessageComplete(
            [ToolUseBlock(id="toolu_1", name="f")], StopReason(kind=StopKind.TOOL_USE), TokenUsage()
        )
        await drive(ToolIds(), request, make_call(), [ToolUseStart(0, "toolu_1", "f"), done])


@pytest.mark.anyio
async def test_tool_ids_yields_new_events_and_leaves_the_ones_it_was_given_alone() -> None:
    given: list[StreamEvent] = [
        ToolUseStart(0, "toolu_1", "f"),
        ToolUseInputDelta(0, "toolu_1", "{}"),
        ToolUseEnd(0, "toolu_1", "f", {}),
    ]
    request = CanonicalRequest(
        model="anthropic:claude-x", messages=[Message.user("hi")], max_output_tokens=10
    )
    _, out = await drive(bound(ToolIds(prefix="toolu_")), request, make_call(), given)
    assert all(e.tool_use_id == "toolu_1" for e in given)  # type: ignore[attr-defined]
    assert {e.tool_use_id for e in out} != {"toolu_1"}  # type: ignore[attr-defined]
    assert all(a is not b for a, b in zip(given, out, strict=True))
