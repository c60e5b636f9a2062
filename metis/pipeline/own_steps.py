"""The request steps of an application's own stages, checked as the engine takes them.

A transform's ``rewrite`` or a hook's ``open`` written so that the engine cannot run it (never
implemented, ``async def`` where a plain one is run or the reverse, a ``rewrite`` that returns
nothing, an ``open`` that returns no ``(request, watch)`` pair) would fail in the next stage with
a bare ``AttributeError`` or ``TypeError``; here it is a :class:`StackError` naming the stage and
what it should do (docs/stages.md). The built-in stages are taken as they are.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from metis.errors import StackError
from metis.pipeline.call import Call
from metis.pipeline.hooks import ASYNC, OPEN, SYNC

Step = Callable[..., Any]

_WRITTEN = {
    SYNC: (
        "rewrite",
        False,
        "a RequestStage's rewrite(request, call) is a plain def "
        "(subclass AsyncRequestStage for one that awaits)",
    ),
    ASYNC: ("rewrite", True, "an AsyncRequestStage's rewrite(request, call) is async def"),
    OPEN: ("open", True, "an EventHook's open(request, call) is async def"),
}


def own_step(kind: int, step: Step, stage: Any) -> Step:
    """``step`` as the engine runs it: checked when ``stage`` is the application's."""
    if type(stage).__module__.startswith("metis."):
        return step
    name = stage.name
    problem = _written_wrong(type(stage), kind)
    if problem:
        return _failing(kind, f"stage {name!r}: {problem}")
    if kind == SYNC:
        return _sync(step, name)
    if kind == ASYNC:
        return _async(step, name)
    return _open(step, name)


def _written_wrong(cls: type, kind: int) -> str | None:
    method, is_async, says = _WRITTEN[kind]
    found = getattr(cls, method)
    if getattr(found, "__module__", "").startswith("metis.pipeline."):
        return f"it does not implement {method}(request, call)"
    if inspect.iscoroutinefunction(found) != is_async:
        return says
    return None


def _failing(kind: int, says: str) -> Step:
    """A step that raises a StackError saying ``says`` when a call takes it (a pipeline may
    hold a stage written wrong: ``metis stack`` shows it; a call through it fails)."""
    if kind == SYNC:

        def fail(request: Any, call: Call) -> Any:
            raise StackError(says)

        return fail

    async def fail_async(request: Any, call: Call) -> Any:
        raise StackError(says)

    return fail_async


def _returned_nothing(name: str) -> StackError:
    return StackError(
        f"stage {name!r}: rewrite returned None; it returns the request, the same one or a "
        "new one (request.model_copy(update=...))"
    )


def _sync(step: Step, name: str) -> Step:
    def rewrite(request: Any, call: Call) -> Any:
        rewritten = step(request, call)
        if rewritten is None:
            raise _returned_nothing(name)
        return rewritten

    return rewrite


def _async(step: Step, name: str) -> Step:
    async def rewrite(request: Any, call: Call) -> Any:
        rewritten = await step(request, call)
        if rewritten is None:
            raise _returned_nothing(name)
        return rewritten

    return rewrite


def _open(step: Step, name: str) -> Step:
    async def open_(request: Any, call: Call) -> Any:
        opened = await step(request, call)
        if not (isinstance(opened, tuple | list) and len(opened) == 2) or opened[0] is None:
            raise StackError(
                f"stage {name!r}: open returned {type(opened).__name__}; it returns "
                "(request, watch), the watch None when the call has nothing to watch"
            )
        return opened

    return open_


def check_wrapper(stage: Any) -> None:
    """A wrapper of the application's whose ``__call__`` is a coroutine (``async def`` with no
    ``yield``): the engine iterates what it returns, which a coroutine is not."""
    if type(stage).__module__.startswith("metis."):
        return
    if inspect.iscoroutinefunction(type(stage).__call__):
        raise StackError(
            f"stage {stage.name!r}: its __call__ is async def with no yield; a wrapper yields "
            "the items (async for item in inner(request, call): yield item) or returns "
            "inner(request, call) from a plain def"
        )
