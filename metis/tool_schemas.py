"""How a Python function or a pydantic model becomes a tool's definition (:mod:`metis.tool_making`):
the input schema from the signature's type hints through pydantic, the description from the
docstring's first paragraph, each parameter's from its ``Args:`` entry."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import PydanticUserError, TypeAdapter

from metis.errors import ConfigError

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?:\s*(.*)$")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""A tool name every provider takes."""


def tool_name(function: Callable[..., Any], name: str | None) -> str:
    """The name given, else the function's (a ``functools.partial``'s: its function's); a
    ConfigError saying to give one when the function has none a provider takes (a lambda, a
    callable object)."""
    if name is not None:
        return name
    inner = function.func if isinstance(function, functools.partial) else function
    found = getattr(inner, "__name__", None)
    if isinstance(found, str) and _NAME.match(found):
        return found
    what = f"named {found!r}" if isinstance(found, str) else "with no __name__"
    raise ConfigError(
        f"a tool made of a {type(function).__name__} {what} needs a name a provider takes "
        "(1 to 64 of a-z, A-Z, 0-9, _ and -): give one, metis.tool(name='get_weather')(f) "
        "or Tool.from_function(f, name='get_weather')"
    )


def input_schema(function: Callable[..., Any], name: str) -> dict[str, Any]:
    """The JSON schema of ``function``'s parameters; a parameter whose type has none, or a
    ``*args`` (a call's input is an object, by name), is a ConfigError naming the tool."""
    for place, given in enumerate(inspect.signature(function).parameters.values()):
        if place == 0 and given.name in ("self", "cls"):
            raise ConfigError(
                f"tool {name!r}: {given.name} cannot be filled by a model: a method is a tool "
                f"once bound to its object, metis.tool(obj.{name}) (not @metis.tool in the class)"
            )
        if given.kind is inspect.Parameter.VAR_POSITIONAL:
            raise ConfigError(
                f"tool {name!r}: *{given.name} cannot be filled: a model calls a tool with "
                "its arguments by name; give the tool named parameters"
            )
    try:
        return TypeAdapter[Any](function).json_schema()  # type: ignore[arg-type]
    except NameError as exc:  # a string annotation (from __future__ import annotations)
        raise ConfigError(
            f"tool {name!r}: a type its parameters name does not resolve ({exc}): a type "
            "defined inside a function is not found from a string annotation; define it at "
            "module level"
        ) from None
    except PydanticUserError as exc:
        hints = _parameter_types(function)
        for parameter, annotation in hints.items():
            try:
                TypeAdapter[Any](annotation).json_schema()
            except PydanticUserError as refused:
                raise ConfigError(
                    f"tool {name!r}: parameter {parameter!r} has the type "
                    f"{_type_name(annotation)}, which has no JSON schema a model can fill; use a "
                    "JSON type (str, int, float, bool, list, dict, Literal, a pydantic model)"
                    + typed_dict_advice(refused)
                ) from None
        reason = str(exc).split(". ")[0]  # pydantic's advice after it is about its models
        raise ConfigError(
            f"tool {name!r}: no JSON schema for its parameters ({reason}); a tool is a Python "
            "function whose parameters have type hints of JSON types"
        ) from None


def typed_dict_advice(refused: BaseException) -> str:
    """What would do for a ``typing.TypedDict``, which pydantic reads only from
    ``typing_extensions`` before Python 3.12; else nothing."""
    if getattr(refused, "code", None) != "typed-dict-version":
        return ""
    return (
        "; it is a typing.TypedDict, which pydantic takes only from typing_extensions before "
        "Python 3.12: from typing_extensions import TypedDict"
    )


def _parameter_types(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        hints = get_type_hints(function, include_extras=True)
    except Exception:  # an annotation that does not resolve: pydantic's own error says which
        return {}
    parameters = inspect.signature(function).parameters
    return {name: hints[name] for name in parameters if name in hints}


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        module = annotation.__module__
        return (
            annotation.__qualname__
            if module == "builtins"
            else f"{module}.{annotation.__qualname__}"
        )
    return repr(annotation)


def docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and each parameter's text from an ``Args:`` section."""
    summary = doc.split("\n\n")[0].strip().replace("\n", " ")
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if in_args and line.strip() and not line.startswith((" ", "\t")):
            in_args = False  # the next section
        match = _ARG_LINE.match(line) if in_args else None
        if match:
            current = match[1].lstrip("*")
            params[current] = match[2].strip()
        elif in_args and current and line.strip():
            params[current] += " " + line.strip()
    return summary, params


def drop_titles(schema: Any) -> None:
    """pydantic's generated ``title`` keys say nothing a model needs; tokens are not free."""
    if isinstance(schema, dict):
        schema.pop("title", None)
        for key, value in schema.items():
            if key != "properties":
                drop_titles(value)
            else:
                for prop in value.values():
                    drop_titles(prop)
    elif isinstance(schema, list):
        for item in schema:
            drop_titles(item)


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
