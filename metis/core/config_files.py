"""Reading config files (stacks, models.yaml, the price table) with errors that say where.

Every error is a ConfigError naming the file, the dotted key and what was expected there;
values of secret keys are never echoed. :func:`typed` checks a public constructor's argument
the same way (a ConfigError naming it, never an AttributeError from inside).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from metis.core import yaml_limits
from metis.core.model_fields import fields_at
from metis.core.suggest import did_you_mean
from metis.errors import ConfigError, redact

MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""The largest config file read; a bigger one is refused before it is loaded."""


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed YAML document at ``path``; ``what`` names it in errors ("model registry")."""
    file = Path(path).expanduser()
    try:
        if file.is_file() and file.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{what} {file} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {file}: {exc.strerror}") from None
    return parse_yaml(decode_text(data, str(file)), str(file))


def decode_text(data: bytes, source: str) -> str:
    """A config file's bytes as text; a binary or non-UTF-8 file is a ConfigError."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: not a text file (invalid UTF-8 at byte {exc.start})"
        ) from None


# libyaml's parser, when PyYAML was built with it (its wheels are): ten times faster, which is
# most of the cost of loading a stack.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str, source: str) -> Any:
    """One YAML document, within the limits of :mod:`metis.core.yaml_limits` (nesting, alias
    expansion); anything else wrong with it is a ConfigError naming ``source``."""
    problem = yaml_limits.unsafe_text(text)
    if problem:
        raise ConfigError(f"{source}: refused: {problem}")
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problem = yaml_limits.unsafe_graph(node)
        if problem:
            raise ConfigError(f"{source}: refused: {problem}")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {yaml_problem(exc)}") from None
    except (RecursionError, MemoryError):
        raise ConfigError(f"{source}: refused: too large or too deeply nested") from None
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint on one line, with the place in the file (its own text names the
    parsed string, ``"<unicode string>"``, where the file is meant)."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return " ".join(str(exc).split())
    mark = exc.problem_mark
    said = f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    if exc.context and exc.context_mark is not None:
        start = exc.context_mark
        said += f" ({exc.context} at line {start.line + 1}, column {start.column + 1})"
    elif exc.context:
        said += f" ({exc.context})"
    return said


_EXPECTED = {
    "string_type": "expected a string",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "decimal_type": "expected a number",
    "decimal_parsing": "expected a number",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
}


def config_error(
    exc: ValidationError,
    source: str,
    schema: type[BaseModel] | None = None,
    prefix: Sequence[str | int] = (),
) -> ConfigError:
    """A ConfigError for ``exc`` of the form ``<source>: dotted.key: expected ..., got ...``.

    ``schema`` (the model that was validated) lets an unknown key's error list the keys
    allowed there; ``prefix`` is prepended to every key path.
    """
    problems = []
    for err in exc.errors():
        loc = [*prefix, *err["loc"]]
        if any(str(part) in _SECRETS for part in loc):
            err = {**err, "input": _HIDDEN}
        where = ".".join(str(part) for part in loc)
        explained = _explain(err, schema, list(err["loc"]))
        problems.append(f"{where}: {explained}" if where else explained)
    return ConfigError(redact(f"{source}: " + "; ".join(problems)))


def _explain(err: Any, schema: type[BaseModel] | None, loc: list[Any]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "config":
        return str(err["msg"])
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(schema, loc[:-1])
        listed = f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return f"unknown key{listed}{did_you_mean(str(loc[-1]), allowed) if loc else ''}"
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected"))
        near = did_you_mean(str(err["input"]), re.findall(r"'([^']*)'", expected))
        return f"expected {expected}, got {show(err['input'])}{near}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = next(iter(ctx.values()), "?")
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        sign = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<"}.get(kind, "<=")
        return f"expected a number {sign} {bound}, got {show(err['input'])}"
    if kind in ("string_too_short", "too_short"):
        return f"expected a non-empty value, got {show(err['input'])}"
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {show(err['input'])}"
    message = str(err["msg"])
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    if message.startswith("expected"):
        return message
    return f"{message[:1].lower()}{message[1:]}, got {show(err['input'])}"


_SECRETS = frozenset({"api_key", "extra_headers"})  # values never echoed in errors
_HIDDEN = object()


def show(value: Any) -> str:
    if value is _HIDDEN:
        return "a value not shown here"
    return "nothing" if value is None else repr(value)


def _allowed_keys(schema: type[BaseModel] | None, path: list[Any]) -> list[str]:
    """The field names of the model found by following ``path`` from ``schema``."""
    if schema is None:
        return []
    return [name for name in fields_at(schema, path) if name not in ("source", "model")]


T = TypeVar("T")


def typed(value: Any, kind: type[T], what: str, hint: str = "") -> T:
    """``value`` when it is a ``kind``, else a ConfigError naming ``what`` (``Adapter(stack)``)
    and, after the type it expects, ``hint``."""
    if isinstance(value, kind):
        return value
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    article = "an" if kind.__name__[:1].lower() in "aeiou" else "a"
    raise ConfigError(
        f"{what}: expected {article} {kind.__name__}{hint}, got {type(value).__name__} {shown}"
    )
