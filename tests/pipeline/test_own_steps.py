"""An application's own stage written so the engine cannot run it is a StackError naming the
stage and what to do (metis/pipeline/own_steps.py; docs/stages.md), not a bare AttributeError
or TypeError from the stage after it."""

from __future__ import annotations

from typing import Any

import pytest

from metis import CanonicalRequest, Message, build_adapter
from metis.errors import StackError
from metis.model import StreamEvent
from metis.pipeline import (
    AsyncRequestStage,
    Call,
    EventHook,
    Inner,
    RequestStage,
    Stage,
    Watch,
    register_stage,
)
from metis.testing.emulator import Emulator

pytestmark = pytest.mark.backend_independent

REQUEST = CanonicalRequest(
    model="anthropic:claude-sonnet-4-5", messages=[Message.user("Hi")], max_output_tokens=64
)


class NoRewrite(RequestStage[CanonicalRequest]):
    name = "no_rewrite"


class ReturnsNothing(RequestStage[CanonicalRequest]):
    name = "returns_nothing"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        request.model_copy(update={"max_output_tokens": 32})  # the copy not returned
        return None  # type: ignore[return-value]


class AsyncRewriteInARequestStage(RequestStage[CanonicalRequest]):
    name = "async_rewrite"

    async def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:  # type: ignore[override]
        return request


class AsyncReturnsNothing(AsyncRequestStage[CanonicalRequest]):
    name = "async_returns_nothing"

    async def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        return None  # type: ignore[return-value]


class OpenReturnsNothing(EventHook[CanonicalRequest]):
    name = "open_returns_nothing"

    async def open(self, request: CanonicalRequest, call: Call) -> tuple[CanonicalRequest, Watch]:
        return None  # type: ignore[return-value]


class PlainOpen(EventHook[CanonicalRequest]):
    name = "plain_open"

    def open(self, request: CanonicalRequest, call: Call) -> Any:
        return request, None


class Fine(RequestStage[CanonicalRequest]):
    name = "fine"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        return request.model_copy(update={"max_output_tokens": 32})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stage", "said"),
    [
        (NoRewrite(), "stage 'no_rewrite': it does not implement rewrite(request, call)"),
        (ReturnsNothing(), "stage 'returns_nothing': rewrite returned None; it returns the"),
        (AsyncRewriteInARequestStage(), "subclass AsyncRequestStage for one that awaits"),
        (AsyncReturnsNothing(), "stage 'async_returns_nothing': rewrite returned None"),
        (OpenReturnsNothing(), "open returned NoneType; it returns (request, watch)"),
        (PlainOpen(), "stage 'plain_open': an EventHook's open(request, call) is async def"),
    ],
)
async def test_a_stage_written_wrong_is_a_stack_error_naming_it(stage: Any, said: str) -> None:
    emulator = Emulator()
    async with build_adapter("anthropic", api_key="k", http_client=emulator.client()) as adapter:
        adapter.pipeline.insert_after("tool_ids", stage)
        with pytest.raises(StackError) as caught:
            await adapter.complete(REQUEST)
        assert said in str(caught.value)
        adapter.pipeline.replace(stage.name, Fine())
        assert (await adapter.complete(REQUEST)).text
    assert emulator.stats.requests == 1


def test_a_built_in_stages_name_is_not_registered_over_it() -> None:
    class MyRetry(RequestStage[CanonicalRequest]):
        name = "retry"

    with pytest.raises(StackError) as caught:
        register_stage(MyRetry)
    assert "'retry' names a built-in stage" in str(caught.value)
    assert "stages: {replace: {retry: my_retry}}" in str(caught.value)
    assert build_adapter("anthropic", api_key="k").pipeline.names()[-1] == "transport"


class CoroutineWrapper(Stage[CanonicalRequest, CanonicalRequest, StreamEvent, StreamEvent]):
    name = "coroutine_wrapper"

    async def __call__(  # type: ignore[override]
        self, request: CanonicalRequest, call: Call, inner: Inner[CanonicalRequest, StreamEvent]
    ) -> Any:
        return inner(request, call)


@pytest.mark.anyio
async def test_a_wrapper_whose_call_is_a_coroutine_is_refused_naming_it() -> None:
    emulator = Emulator()
    async with build_adapter("anthropic", api_key="k", http_client=emulator.client()) as adapter:
        with pytest.raises(StackError) as caught:
            adapter.pipeline.insert_after("tool_ids", CoroutineWrapper())
            await adapter.complete(REQUEST)
        assert "stage 'coroutine_wrapper': its __call__ is async def with no yield" in str(
            caught.value
        )
    assert emulator.stats.requests == 0
