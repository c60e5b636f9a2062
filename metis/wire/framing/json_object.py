"""One JSON object of a response body, parsed, or a ProtocolError saying what is wrong with
it: not UTF-8 (or compressed without saying so), invalid JSON (an HTML page where JSON was
expected named by its title), JSON past :mod:`metis.wire.json_limits`, or not an object."""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from metis.errors import ProtocolError
from metis.wire import json_limits
from metis.wire.compressed import undeclared_compression
from metis.wire.http_errors import body_excerpt
from metis.wire.json_limits import MAX_DEPTH, JSONLimitError

_SNIPPET = 200


def parse_object(text: str, fmt: str) -> dict[str, Any]:
    """One JSON object of a ``fmt`` body, or a ProtocolError saying what is wrong with it."""
    try:
        value = json_limits.loads(text)
    except JSONLimitError as exc:
        raise ProtocolError(
            f"provider sent JSON metis refuses in its {fmt} stream: {exc}"
        ) from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        if text.lstrip()[:1] == "<":
            page = body_excerpt(text.encode())
            raise ProtocolError(f"provider answered where JSON was expected with: {page}") from None
        raise ProtocolError(
            f"provider sent invalid JSON in its {fmt} stream: {text[:_SNIPPET]}"
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(
            f"provider sent a JSON {type(value).__name__} where an object was expected "
            f"in its {fmt} stream: {text[:_SNIPPET]}"
        )
    return value


def ndjson_object(line: bytes) -> dict[str, Any]:
    """One NDJSON line's object: the usual line parsed at once with ``from_json``, anything
    else (a BOM, leading blanks, what jiter refuses) through :func:`parse_object`."""
    try:
        text = line.decode()
    except UnicodeDecodeError:
        text = body_text(line, "ndjson")  # raises, classified
    if text[:1] == "{" and text.count("{") + text.count("[") <= MAX_DEPTH:
        try:
            value: dict[str, Any] = from_json(text, allow_inf_nan=False)
            return value
        except ValueError:
            pass
    return parse_object(text, "ndjson")


def body_text(body: bytes, fmt: str) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        compressed = undeclared_compression(body)
        where = f"({exc.reason} at byte {exc.start})"
        raise ProtocolError(
            f"provider sent no {fmt} body: {compressed}"
            if compressed
            else f"provider sent invalid UTF-8 in its {fmt} stream {where}"
        ) from None
