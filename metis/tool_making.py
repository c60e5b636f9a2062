"""Tools from Python functions and pydantic models (:class:`Tool`, ``@tool``), and the
``tools=`` a call is given, checked and named in its errors. Running a reply's tool calls is
:mod:`metis.tools`' (which exports these names too)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel, validate_call

from metis.core.options import checked_options
from metis.errors import ConfigError, InvalidRequestError
from metis.model.request import FREEFORM_SCHEMA, FreeformInput, ToolDefinition
from metis.model.server_tools import ServerToolLike
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
"""A tool of any signature: the type of a list of tools kept in a variable, which a type
checker infers as ``list[object]`` when their signatures differ."""
ToolLike = AnyTool | ToolDefinition | ServerToolLike | Callable[..., Any]
"""One item of ``tools=``: a tool, a plain function, a :class:`ToolDefinition`, or a tool the
provider runs itself (``WebSearch``, ...): the type of a list mixing them kept in a variable."""


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
            hint = _dict_tool(item) if isinstance(item, Mapping) else ""
            raise InvalidRequestError(
                f"tools[{index}]: expected a @metis.tool function, a plain function, a "
                "ToolDefinition or a provider tool (metis.WebSearch, ...), got "
                f"{described_value(item)}{hint}"
            )
    return listed


def _dict_tool(item: Mapping[Any, Any]) -> str:
    """What reads a tool written as a provider's dict: the whole list at once."""
    if item.get("type") == "function" or "function" in item:
        reader = "metis.histories.from_openai_tools(tools)"
    elif "input_schema" in item:
        reader = "metis.histories.from_anthropic_tools(tools)"
    else:
        reader = "metis.histories.from_openai_tools or from_anthropic_tools"
    return (
        f"; a list of a provider's tool dicts is read by {reader}, which returns the "
        "metis.ToolDefinitions to give as tools="
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
