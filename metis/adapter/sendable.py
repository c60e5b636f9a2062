"""Whether a value can travel as JSON to a provider, and if not, which part of it cannot.

Tool inputs, tool schemas and the output schema are ``dict[str, Any]``: an application may
put anything there. JSON carries objects with string keys, arrays, strings, finite numbers,
booleans and null; a ``datetime``, ``bytes``, a ``set``, ``NaN`` or a string holding a lone
UTF-16 surrogate would fail (or be sent as something the provider refuses) only once the
request is serialized, far from the code that made it. :func:`first_unsendable` finds the
first such part and names its path; :func:`check_request` runs it over a request before any
stage sees it (the token estimate and the codecs serialize these parts).
"""

from __future__ import annotations

import functools
import marshal
import math
import re
from typing import Any

from metis.errors import InvalidRequestError
from metis.model.content import ToolUseBlock
from metis.model.history import History, history_of
from metis.model.request import CanonicalRequest
from metis.model.schema_forms import form

MAX_DEPTH = 100
KEPT_VERDICTS = 1024
KEPT_SIZE = 4096


@functools.cache
def _surrogate() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff]")


@functools.cache
def _name() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def first_unsendable(value: Any, path: str) -> str | None:
    """``"<path>: <why>"`` for the first part of ``value`` that JSON cannot carry, or None."""
    if _known_plain(value):  # the usual case, told without naming a path per part
        return None
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        cls = item.__class__
        if item is None or cls in (bool, int):
            continue
        if cls is str or isinstance(item, str):
            if not item.isascii() and _surrogate().search(item):
                return f"{where}: a string with a lone UTF-16 surrogate, which is not text"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{where}: {item!r}, which is not a JSON number"
        elif isinstance(item, int):
            continue
        elif depth >= MAX_DEPTH:
            return f"{where}: nested deeper than {MAX_DEPTH} levels"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return f"{where}: the key {key!r} is a {type(key).__name__}, not a string"
                stack.append((child, f"{where}{_member(key)}", depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
        else:
            return f"{where}: a {type(item).__name__}, which JSON cannot carry"
    return None


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is JSON all through, built of the exact JSON types (False for anything
    else, which :func:`first_unsendable` then walks naming paths)."""
    cls = value.__class__
    if cls is str:
        return value.isascii() or _surrogate().search(value) is None
    if value is None or cls is int or cls is bool:
        return True
    if cls is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if cls is dict:
        return all(
            key.__class__ is str and _plain(child, depth + 1) for key, child in value.items()
        )
    if cls is list or cls is tuple:
        return all(_plain(child, depth + 1) for child in value)
    return False


def _known_plain(value: Any) -> bool:
    """:func:`_plain`, found once per content: a conversation resends the same tool inputs
    and schemas each call, as new objects or as dicts an application may have changed since.
    The key is the value's marshal form, which holds every part's exact type (it writes no
    other class of a JSON type, and tells ``1`` from ``True``), so two values with one key are
    alike all through; only a plain verdict is kept, of values up to ``KEPT_SIZE`` bytes."""
    try:
        key = marshal.dumps(value)
    except ValueError:  # a class marshal cannot write: not a JSON type anyway
        return False
    if key in _PLAIN:
        return True
    if not _plain(value, 0):
        return False
    if len(key) <= KEPT_SIZE:
        if len(_PLAIN) >= KEPT_VERDICTS:
            _PLAIN.pop(next(iter(_PLAIN)), None)
        _PLAIN[key] = None
    return True


_PLAIN: dict[bytes, None] = {}
_PLAIN_FORM = "sendable"


def _plain_schema(schema: Any) -> bool:
    return _plain(schema, 0)


def _member(key: str) -> str:
    if _name().fullmatch(key):
        return f".{key}"
    return f"[{key[:40]!r}]" if not _surrogate().search(key) else "[<a key with a lone surrogate>]"


def check_request(request: CanonicalRequest, provider: str) -> History:
    """The free-form JSON parts of ``request`` (tool inputs, tool schemas, the output schema)
    hold only what JSON can carry; else an InvalidRequestError naming each field. Returns the
    record of its messages (:func:`metis.model.history.history_of`), which it reads."""
    messages = request.messages
    history = history_of(messages)
    problems = [
        first_unsendable(block.input, f"messages[{i}].content[{j}].input")
        for i in history.tools_at
        for j, block in enumerate(messages[i].content)
        if isinstance(block, ToolUseBlock) and not _known_plain(block.input)
    ]
    problems += [
        first_unsendable(tool.input_schema, f"tools[{k}].input_schema")
        for k, tool in enumerate(request.tools)
        if not form(tool.input_schema, _PLAIN_FORM, _plain_schema)
    ]
    if request.output_schema is not None:
        problems.append(first_unsendable(request.output_schema, "output_schema"))
    found = [problem for problem in problems if problem]
    if found:
        raise InvalidRequestError(
            "the request holds values JSON cannot carry: " + "; ".join(found[:5]),
            provider=provider,
            request_id=request.request_id,
        )
    return history
