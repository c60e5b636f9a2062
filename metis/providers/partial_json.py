"""Recovering what parses cleanly from a truncated JSON object (docs/contract.md §2)."""

from __future__ import annotations

import json
from typing import Any

_MAX_ATTEMPTS = 64


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def parse_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object, or None when it is not exactly one.

    Python's ``NaN``/``Infinity`` extensions are refused: they are not JSON, and an input holding
    them could not be sent back to any provider. Nesting too deep for the parser is refused too,
    rather than raising ``RecursionError`` out of a stream."""
    try:
        value = _DECODER.decode(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def parse_partial_object(text: str) -> dict[str, Any]:
    """The largest prefix of a truncated JSON object that parses, closed off; else ``{}``.

    ``{"path": "a.txt", "limit": 1`` gives ``{"path": "a.txt"}``: the last member may still
    have been growing, so only top-level members followed by a comma (or whose value's closing
    bracket arrived) are kept. A member whose value was cut off is left out whole, never
    shortened: ``{"a": 1, "b": [1, 2`` gives ``{"a": 1}``, not ``{"a": 1, "b": [1]}``.
    """
    whole = parse_object(text)
    if whole is not None:
        return whole
    closers: list[str] = []
    cuts: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            closers.append("}")
        elif ch == "[":
            closers.append("]")
        elif ch in "}]":
            if closers:
                closers.pop()
            if len(closers) <= 1:  # a top-level member's value, or the whole object, closed
                cuts.append((i + 1, "".join(reversed(closers))))
        elif ch == "," and len(closers) == 1:  # between two top-level members
            cuts.append((i, closers[0]))
    for cut, closing in reversed(cuts[-_MAX_ATTEMPTS:]):
        candidate = parse_object(text[:cut] + closing)
        if candidate is not None:
            return candidate
    return {}
