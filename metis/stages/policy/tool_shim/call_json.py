"""One ``<tool_call>`` tag's content as a call: its tool's name, its arguments, and the
arguments' JSON exactly as the model wrote it (so the input delta carries the model's own
text), or the reason it is not a call."""

from __future__ import annotations

import json
from typing import Any


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_WS = " \t\r\n"


def parse_call(body: str) -> tuple[str, dict[str, Any], str] | str:
    """``(name, arguments, the arguments' JSON as written)`` from a tag's content, or the
    reason it is not a call. ``parameters`` is taken for ``arguments`` (Llama 3.1 writes it),
    arguments given as a JSON string are unpacked, and a Markdown code fence is looked past."""
    text = body.strip(_WS)
    if text.startswith("```"):
        text = text[text.find("\n") + 1 :] if "\n" in text else ""
        text = text.rstrip(_WS).removesuffix("```").strip(_WS)
    members = _members(text)
    if members is None:
        return "a <tool_call> tag does not hold a JSON object"
    name = members.get("name", (None, ""))[0]
    if not isinstance(name, str) or not name:
        return 'a <tool_call> tag has no "name"'
    for key in ("arguments", "parameters"):
        if key in members:
            value, raw = members[key]
            break
    else:
        return name, {}, "{}"
    if isinstance(value, str):
        if not value.strip(_WS):  # "arguments": "" is how some models say "none"
            return name, {}, "{}"
        unpacked = _members(value.strip(_WS))
        if unpacked is None:
            return f"the arguments of a call to {name!r} are not a JSON object"
        return name, {k: v for k, (v, _) in unpacked.items()}, value
    if not isinstance(value, dict):
        return f"the arguments of a call to {name!r} are not a JSON object"
    return name, value, raw


def _members(text: str) -> dict[str, tuple[Any, str]] | None:
    """A JSON object's top-level members, each as (value, its JSON text as written); None if
    ``text`` is not exactly one JSON object."""
    if not text.startswith("{"):
        return None
    members: dict[str, tuple[Any, str]] = {}
    end = len(text)
    pos = _skip(text, 1)
    try:
        if pos < end and text[pos] == "}":
            return members if _skip(text, pos + 1) == end else None
        while pos < end:
            if text[pos] != '"':
                return None
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if pos >= end or text[pos] != ":":
                return None
            pos = _skip(text, pos + 1)
            value, after = _DECODER.raw_decode(text, pos)
            members[key] = (value, text[pos:after])
            pos = _skip(text, after)
            if pos < end and text[pos] == ",":
                pos = _skip(text, pos + 1)
            elif pos < end and text[pos] == "}":
                return members if _skip(text, pos + 1) == end else None
            else:
                return None
    except (ValueError, RecursionError):
        return None
    return None


def _skip(text: str, pos: int) -> int:
    end = len(text)
    while pos < end and text[pos] in _WS:
        pos += 1
    return pos
