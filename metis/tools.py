"""Tools from Python functions and pydantic models, and running a reply's tool calls.

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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

import anyio
import anyio.to_thread
from pydantic import BaseModel, validate_call

from metis.core.options import checked_options
from metis.core.raised import carrying, first_raised
from metis.errors import ConfigError, InvalidRequestError
from metis.model.content import Message, Role, ToolResultBlock, ToolUseBlock
from metis.model.request import FREEFORM_SCHEMA, FreeformInput, ToolDefinition
from metis.model.response import CanonicalResponse
from metis.model.server_tools import ServerToolLike
from metis.tool_results import failed, result_of, timed_out, unrunnable
from metis.tool_schemas import docstring, drop_titles, input_schema, snake, tool_name

P = ParamSpec("P")
R = TypeVar("R")
P2 = ParamSpec("P2")
R2 = TypeVar("R2")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Tool(Generic[P, R]):
    """A tool the model may call: its definition, and the function that answers the call. A
    ``Tool[P, R]`` is called as its function is (``P``'s arguments, ``R`` back), so a type
    checker knows an ``@metis.tool`` function's signature as well as before it was decorated."""

    definition: ToolDefinition
    function: Callable[P, R]

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.definition.name

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    @classmethod
    @checked_options
    def from_function(
        cls,
        function: Callable[P2, R2],
        *,
        name: str | None = None,
        description: str | None = None,
        freeform: FreeformInput | None = None,
        strict: bool | None = None,
    ) -> Tool[P2, R2]:
        """A tool from ``function``'s signature and docstring; ``freeform``: its input is
        text, handed to its one parameter, ``input: str``; ``strict``: the provider holds the
        call's input to the schema (:attr:`ToolDefinition.strict`, docs/contract.md §10)."""
        if not callable(function) or isinstance(function, type):
            raise ConfigError(f"a tool is made of a function, got {described_value(function)}")
        summary, params = docstring(inspect.getdoc(function) or "")
        name = tool_name(function, name)
        schema = input_schema(function, name)
        if freeform is not None:
            _takes_text(function, schema, name)
        for param, text in params.items():
            prop = schema.get("properties", {}).get(param)
            if isinstance(prop, dict):
                prop.setdefault("description", text)
        drop_titles(schema)
        definition = ToolDefinition(
            name=name,
            description=description if description is not None else summary,
            input_schema=schema if freeform is None else FREEFORM_SCHEMA,
            freeform=freeform,
            strict=strict,
        )
        return Tool(definition, validate_call(function))

    @classmethod
    @checked_options
    def from_model(
        cls, model: type[M], *, name: str | None = None, strict: bool | None = None
    ) -> Tool[..., M]:
        """A tool whose input is ``model``: answering a call returns the validated instance."""
        schema = model.model_json_schema()
        drop_titles(schema)
        definition = ToolDefinition(
            name=name or snake(model.__name__),
            description=(inspect.getdoc(model) or "").split("\n\n")[0],
            input_schema=schema,
            strict=strict,
        )

        def answer(**fields: Any) -> M:
            return model.model_validate(fields)

        return Tool(definition, answer)


AnyTool = Tool[..., Any]
"""A tool of any signature."""


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    freeform: FreeformInput | None = None,
    strict: bool | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
@checked_options
def tool(
    function: Callable[P, R] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    freeform: FreeformInput | None = None,
    strict: bool | None = None,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a :class:`Tool` of a function: ``@tool`` or ``@tool(name=..., description=...)``;
    ``@tool(freeform=FreeformInput())`` for a function of one ``input: str`` that takes free
    text; ``@tool(strict=True)`` to have the provider hold its input to the schema. The tool
    keeps the function's signature for type checkers (``Tool[P, R]``)."""

    def make(f: Callable[P, R]) -> Tool[P, R]:
        return Tool.from_function(
            f, name=name, description=description, freeform=freeform, strict=strict
        )

    return make if function is None else make(function)


def _takes_text(function: Callable[..., Any], schema: dict[str, Any], name: str) -> None:
    properties = schema.get("properties")
    text = isinstance(properties, dict) and properties.get("input", {}).get("type") == "string"
    if not text or list(properties or {}) != ["input"]:
        raise ConfigError(
            f"tool {name!r}: a freeform tool's function takes one parameter, input: str"
        )


def as_tool_definition(item: AnyTool | ToolDefinition | Callable[..., Any]) -> ToolDefinition:
    """What a request carries for a tool given as a Tool, a definition or a plain function."""
    if isinstance(item, ToolDefinition):
        return item
    if isinstance(item, Tool):
        return item.definition
    return Tool.from_function(item).definition


async def arun_tools(
    reply: CanonicalResponse | Message,
    tools: Sequence[AnyTool | ToolDefinition | ServerToolLike | Callable[..., Any]],
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
    reply: CanonicalResponse | Message,
    tools: Sequence[AnyTool | ToolDefinition | ServerToolLike | Callable[..., Any]],
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


def tools_by_name(tools: Sequence[AnyTool | Callable[..., Any]]) -> dict[str, AnyTool]:
    """The tools (plain functions made into tools) by name."""
    made = [t if isinstance(t, Tool) else Tool.from_function(t) for t in tools]
    return {t.name: t for t in made}


def tool_list(tools: object) -> list[Any]:
    """``tools=`` as a list, each a tool metis can offer; else an InvalidRequestError saying
    what a tool is (a function given alone, a tool's name as a string, ...)."""
    if (
        isinstance(tools, str | bytes | Mapping)
        or callable(tools)
        or not isinstance(tools, Iterable)
    ):
        name = tools.name if isinstance(tools, Tool) else getattr(tools, "__name__", None)
        hint = f"; give tools=[{name}]" if callable(tools) and name else ""
        raise InvalidRequestError(
            f"tools: expected a list of tools, got {described_value(tools)}{hint}"
        )
    listed = list(tools)
    for index, item in enumerate(listed):
        if not (callable(item) or isinstance(item, ToolDefinition | ServerToolLike)):
            hint = _DICT_TOOL if isinstance(item, Mapping) else ""
            raise InvalidRequestError(
                f"tools[{index}]: expected a @metis.tool function, a plain function, a "
                "ToolDefinition or a provider tool (metis.WebSearch, ...), got "
                f"{described_value(item)}{hint}"
            )
    return listed


_DICT_TOOL = (
    "; a tool written as a provider's dict is metis.ToolDefinition(name=..., description=..., "
    "input_schema=...), the schema Anthropic's input_schema or OpenAI's function.parameters"
)


def described_value(value: object) -> str:
    """``value`` named in an error: a function by its name, anything else by its type and
    (cut) repr."""
    if isinstance(value, Tool):
        return f"the tool {value.name}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"the {type(value).__name__} {value.__qualname__}"
    shown = repr(value)
    return f"{type(value).__name__} {shown if len(shown) <= 60 else shown[:57] + '...'}"


# Internals -------------------------------------------------------------------------------


def _checked(reply: object, tools: object) -> tuple[list[ToolUseBlock], dict[str, AnyTool]]:
    """The tool calls of ``reply``, and the functions of ``tools`` by name (a provider's own
    tools and bare definitions left out: nothing here runs them, as in a session's run);
    either not what it should be an InvalidRequestError, as ``complete(tools=...)`` says."""
    if not isinstance(reply, CanonicalResponse | Message):
        got = type(reply).__name__
        raise InvalidRequestError(
            f"reply: expected a CanonicalResponse or an assistant Message, got {got}"
        )
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
