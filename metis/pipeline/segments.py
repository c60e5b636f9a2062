"""A pipeline compiled into segments, and how a segment runs (docs/engine.md).

A segment is a stretch of stages with no call wrapper in it. It runs as one async generator:
its request steps in stack order (a transform's ``rewrite``, awaited when it is async, a
hook's ``open``), then what is inside it (the next wrapper, given the next segment as its
``inner``; a terminal stage; or the provider's send path), then one loop over the events that
come back, through the watches its hooks opened, innermost first. A segment with nothing but
synchronous transforms runs them when it is called and hands back the inner stream itself, so
it costs no frame at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from metis.errors import StackError
from metis.pipeline.call import Call
from metis.pipeline.hooks import (
    ASYNC,
    BATCHES,
    OPEN,
    SYNC,
    EventHook,
    Opened,
    Runner,
    Steps,
    flattened,
    run_segment,
    yields_batches,
)
from metis.pipeline.own_steps import check_wrapper, own_step
from metis.pipeline.stage import AsyncRequestStage, Stage, Transform

AnyStage = Stage[Any, Any, Any, Any]
TailBuilder = Callable[[tuple[AnyStage, ...], Steps], "Runner | None"]


def step_of(stage: AnyStage) -> tuple[int, Callable[..., Any]] | None:
    """How the engine runs ``stage`` as a request step, or None for a call wrapper."""
    cls = type(stage)
    if isinstance(stage, EventHook) and cls.__call__ is EventHook.__call__:
        return OPEN, own_step(OPEN, stage.open, stage)
    if isinstance(stage, Transform) and cls.__call__ is Transform.__call__:
        return SYNC, own_step(SYNC, stage.rewrite, stage)
    if isinstance(stage, AsyncRequestStage) and cls.__call__ is AsyncRequestStage.__call__:
        return ASYNC, own_step(ASYNC, stage.rewrite, stage)
    return None


def stage_kind(stage: AnyStage) -> str:
    """What kind of stage the engine runs ``stage`` as: ``transform``, ``hook``, ``wrapper``
    (or ``terminal``, the stage that answers)."""
    if stage.terminal:
        return "terminal"
    found = step_of(stage)
    if found is None:
        return "wrapper"
    return "hook" if found[0] == OPEN else "transform"


def compile_stages(stages: tuple[AnyStage, ...], tail: TailBuilder | None = None) -> Runner:
    """The runner of the whole stack: the outermost segment's."""
    return segment(*compile_call(stages, tail))


def compile_call(
    stages: tuple[AnyStage, ...], tail: TailBuilder | None = None
) -> tuple[Steps, Runner]:
    """The outermost segment of the stack: its request steps, and the runner of what is
    inside it (the next wrapper, with every segment inside compiled; or the send path)."""
    steps: list[tuple[int, Callable[..., Any]]] = []
    segments: list[tuple[Steps, AnyStage]] = []  # (steps, the wrapper after them)
    for i, stage in enumerate(stages):
        fused = tail(stages[i:], tuple(steps)) if tail is not None else None
        if fused is not None:
            if not segments:
                return (), fused
            runner = fused
            break
        found = step_of(stage)
        if found is not None and not stage.terminal:
            steps.append(found)
            continue
        segments.append((tuple(steps), stage))
        steps = []
    else:
        if not segments or not segments[-1][1].terminal:
            raise StackError("a pipeline must end with a terminal stage")
        *segments, (last_steps, terminal) = segments
        if not segments:
            return last_steps, _terminal(terminal)
        runner = segment(last_steps, _terminal(terminal))
    (outer_steps, outer_wrapper), *inner_segments = segments
    for seg_steps, wrapper in reversed(inner_segments):
        runner = segment(seg_steps, _wrapped(wrapper, runner))
    return outer_steps, _wrapped(outer_wrapper, runner)


def _terminal(stage: AnyStage) -> Runner:
    def run(request: Any, call: Call, opened: Opened) -> AsyncIterator[Any]:
        iterator = stage(request, call, _nothing_inside)
        opened.append(iterator)
        return iterator

    return run


def _wrapped(stage: AnyStage, inside: Runner) -> Runner:
    check_wrapper(stage)
    batches = yields_batches(inside)
    if batches and not stage.takes_batches:
        inside, batches = flattened(inside), False

    def run(request: Any, call: Call, opened: Opened) -> AsyncIterator[Any]:
        def inner(inner_request: Any, inner_call: Call) -> AsyncIterator[Any]:
            return inside(inner_request, inner_call, opened)

        iterator = stage(request, call, inner)
        if not opened or opened[-1] is not iterator:  # a wrapper may hand back inner's own
            opened.append(iterator)
        return iterator

    setattr(run, BATCHES, batches)
    return run


def _nothing_inside(request: Any, call: Call) -> AsyncIterator[Any]:
    raise StackError("a terminal stage tried to call a stage inside it")


def segment(steps: Steps, inside: Runner) -> Runner:
    """The runner of a segment whose inner part is ``inside``."""
    if not steps:
        return inside
    if all(kind == SYNC for kind, _ in steps):
        rewrites = tuple(step for _, step in steps)

        def rewrite_then_inside(request: Any, call: Call, opened: Opened) -> AsyncIterator[Any]:
            for rewrite in rewrites:
                request = rewrite(request, call)
            return inside(request, call, opened)

        setattr(rewrite_then_inside, BATCHES, yields_batches(inside))
        return rewrite_then_inside

    def run(request: Any, call: Call, opened: Opened) -> AsyncIterator[Any]:
        iterator = run_segment(steps, inside, request, call, opened)
        opened.append(iterator)
        return iterator

    return run


async def prepare(stages: tuple[AnyStage, ...], request: Any, call: Call) -> Any:
    """The request as the last of ``stages`` hands it inward, nothing sent: each request
    step taken (a hook's watch is not kept: no events will come), each wrapper run over the
    rest of ``stages``. What ``count_tokens`` counts is what a call would send."""
    for i, stage in enumerate(stages):
        found = step_of(stage)
        if found is None:
            return await _through_wrapper(stage, stages[i + 1 :], request, call)
        kind, step = found
        if kind == SYNC:
            request = step(request, call)
        elif kind == ASYNC:
            request = await step(request, call)
        else:
            request, _watch = await step(request, call)
    return request


async def _through_wrapper(
    wrapper: AnyStage, rest: tuple[AnyStage, ...], request: Any, call: Call
) -> Any:
    reached: list[Any] = []

    async def inner(inner_request: Any, inner_call: Call) -> AsyncIterator[Any]:
        reached.append(await prepare(rest, inner_request, inner_call))
        nothing: tuple[Any, ...] = ()  # no events: nothing is sent
        for item in nothing:
            yield item

    async with aclosing(wrapper(request, call, inner)) as items:  # type: ignore[type-var]
        async for _ in items:
            pass
    if not reached:
        raise StackError(f"stage {wrapper.name!r} handed no request inward")
    return reached[0]
