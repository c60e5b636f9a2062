"""Tools from Python functions and pydantic models, and running a reply's tool calls: the
tools are made in :mod:`metis.tool_making` (its ``Tool`` and ``tool`` are exported here too),
the calls run here.

::

    @metis.tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
        '''Current weather for a city.

        Args:
            city: The city's name, e.g. "Paris".
        '''
        return f"18 degrees in {city}"

    reply = metis.complete(model, "Weather in Paris?", tools=[get_weather])
    results = metis.run_tools(reply, [get_weather])   # the tool-result message
    reply = metis.complete(model, [*history, reply.message(), results], tools=[get_weather])

The input schema comes from the signature's type hints through pydantic (``Annotated[int,
Field(ge=1)]`` works), the description from the docstring's first paragraph, and each
parameter's description from its ``Args:`` entry. Arguments are validated before the function
runs; a tool that raises (even an exception that cannot be printed), arguments that do not
validate, or a result that cannot be made text (circular, bytes that are not UTF-8, nested too
deep for JSON, an object whose ``str()`` fails) become an ``is_error`` result the model can
read, never an exception in the application. A result that is an image, document, audio or
video block (``ImageBlock.from_bytes(png, "image/png")``), or a list of such blocks and
strings, is the result's content as it is: the model sees the image, not its base64 as text.
A string result's lone UTF-16 surrogates become U+FFFD, as they do in what providers send.
"""

from __future__ import annotations

import contextvars
import inspect
import math
import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread

from metis.core.raised import carrying, first_raised
from metis.errors import ConfigError, InvalidRequestError
from metis.model import CanonicalResponse, MessageComplete
from metis.model.content import Message, Role, ToolResultBlock, ToolUseBlock
from metis.model.request import ToolDefinition
from metis.model.server_tools import ServerToolLike
from metis.tool_making import AnyTool, Tool, ToolLike, tool, tool_list, tools_by_name
from metis.tool_results import failed, result_of, timed_out, unrunnable

__all__ = [
    "AnyTool",
    "Tool",
    "ToolLike",
    "arun_tool_call",
    "arun_tools",
    "checked_timeout",
    "run_tools",
    "tool",
]


async def arun_tools(
    reply: CanonicalResponse | Message | MessageComplete,
    tools: Sequence[ToolLike],
    *,
    timeout_seconds: float | None = None,
) -> Message:
    """Run every tool call of ``reply`` (concurrently; a plain function in a worker thread)
    and return the tool-result message, results in the calls' order. ``timeout_seconds``
    bounds each call: one still running then is answered with an ``is_error`` result saying
    so (a plain function's thread is left to finish on its own)."""
    timeout_seconds = checked_timeout(timeout_seconds)
    calls, by_name = _checked(reply, tools)
    results: list[ToolResultBlock | None] = [None] * len(calls)

    async def one(i: int, call: ToolUseBlock) -> None:
        results[i] = await arun_tool_call(call, by_name, timeout_seconds=timeout_seconds)

    try:  # a tool raising what is not an Exception (SystemExit) goes on out as itself
        async with anyio.create_task_group() as group:
            for i, call in enumerate(calls):
                group.start_soon(carrying, one, i, call)
    except BaseExceptionGroup as failed:
        raise first_raised(failed) from None
    return Message(role=Role.TOOL, content=[r for r in results if r is not None])


def run_tools(
    reply: CanonicalResponse | Message | MessageComplete,
    tools: Sequence[ToolLike],
    *,
    timeout_seconds: float | None = None,
) -> Message:
    """:func:`arun_tools` for code without an event loop. Without ``timeout_seconds`` the
    calls run one by one in this thread. With it, each runs in a worker thread of its own (in a
    copy of this thread's context variables), all at once as :func:`arun_tools` runs them, and
    one still running ``timeout_seconds`` after the calls started is answered with an
    ``is_error`` result saying so. Python cannot stop a
    thread: that tool runs on to its end in the background (a daemon thread, which does not
    hold up the interpreter's exit), and what it returns then is dropped."""
    timeout_seconds = checked_timeout(timeout_seconds)
    calls, by_name = _checked(reply, tools)
    if timeout_seconds is None:
        blocks = [_run_sync(call, by_name) for call in calls]
    else:
        blocks = _run_in_threads(calls, by_name, timeout_seconds)
    return Message(role=Role.TOOL, content=list(blocks))


def _run_in_threads(
    calls: list[ToolUseBlock], tools: Mapping[str, AnyTool], timeout_seconds: float
) -> list[ToolResultBlock]:
    answers: list[ToolResultBlock | BaseException | None] = [None] * len(calls)

    def one(i: int, call: ToolUseBlock) -> None:
        try:
            answers[i] = _run_sync(call, tools)
        except BaseException as exc:  # raised here, in the caller's thread, as without threads
            answers[i] = exc

    threads = [  # each in a copy of the caller's context, as in this thread and in arun_tools
        threading.Thread(
            target=contextvars.copy_context().run,
            args=(one, i, call),
            name=f"metis-tool-{call.name}",
            daemon=True,
        )
        for i, call in enumerate(calls)
    ]
    deadline = time.monotonic() + timeout_seconds
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    blocks = []
    for call, answer in zip(calls, list(answers), strict=True):
        if isinstance(answer, BaseException):
            raise answer
        blocks.append(answer if answer is not None else timed_out(call, timeout_seconds))
    return blocks


async def arun_tool_call(
    call: ToolUseBlock, tools: Mapping[str, AnyTool], *, timeout_seconds: float | None = None
) -> ToolResultBlock:
    """The result of one tool call: the tool's answer, or an ``is_error`` result when the tool
    is unknown, its arguments are not valid, it raises, or it outlasts ``timeout_seconds``.
    ``tools`` by name, as :func:`tools_by_name` makes them."""
    if timeout_seconds is None:
        return await _run(call, tools)
    with anyio.move_on_after(timeout_seconds):
        return await _run(call, tools)
    return timed_out(call, timeout_seconds)


def checked_timeout(timeout_seconds: float | None) -> float | None:
    """``timeout_seconds`` for running tools: None (no bound) or a finite number above 0;
    anything else (0, negative, ``nan``, ``inf``, a string) a ConfigError."""
    if timeout_seconds is None:
        return None
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, int | float)
        or not 0 < timeout_seconds < math.inf
    ):
        raise ConfigError(
            f"tool_timeout_seconds is a number of seconds above 0, or None; got {timeout_seconds!r}"
        )
    return timeout_seconds


# Internals -------------------------------------------------------------------------------


def _checked(reply: object, tools: object) -> tuple[list[ToolUseBlock], dict[str, AnyTool]]:
    """The tool calls of ``reply``, and the functions of ``tools`` by name (a provider's own
    tools and bare definitions left out: nothing here runs them, as in a session's run);
    either not what it should be an InvalidRequestError, as ``complete(tools=...)`` says."""
    reply = reply.message if isinstance(reply, MessageComplete) else reply  # a stream's end
    if not isinstance(reply, CanonicalResponse | Message):
        what = "a CanonicalResponse, a stream's MessageComplete or an assistant Message"
        raise InvalidRequestError(f"reply: expected {what}, got {type(reply).__name__}")
    mine = [t for t in tool_list(tools) if not isinstance(t, ToolDefinition | ServerToolLike)]
    calls = [block for block in reply.content if isinstance(block, ToolUseBlock)]
    return calls, tools_by_name(mine)


async def _run(call: ToolUseBlock, tools: Mapping[str, AnyTool]) -> ToolResultBlock:
    found = tools.get(call.name)
    if found is None or call.input_error is not None:
        return unrunnable(call, tools)
    try:
        if inspect.iscoroutinefunction(getattr(found.function, "__wrapped__", found.function)):
            value = await _awaited(found.function(**call.input))
        else:
            # in a tuple: trio refuses a thread's coroutine, which a plain function may hand
            # back (of an async helper) for its answer
            (value,) = await anyio.to_thread.run_sync(
                lambda: (found.function(**call.input),), abandon_on_cancel=True
            )
            value = await _awaited(value)
    except Exception as exc:
        return failed(call, exc)
    return result_of(call, value)


def _run_sync(call: ToolUseBlock, tools: Mapping[str, AnyTool]) -> ToolResultBlock:
    found = tools.get(call.name)
    if found is None or call.input_error is not None:
        return unrunnable(call, tools)
    try:
        value = found.function(**call.input)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()  # never run: no "never awaited" warning left behind
            raise TypeError(f"tool {call.name} is async: use arun_tools in an event loop")
    except Exception as exc:
        return failed(call, exc)
    return result_of(call, value)


async def _awaited(value: Awaitable[Any] | Any) -> Any:
    return await value if inspect.isawaitable(value) else value
