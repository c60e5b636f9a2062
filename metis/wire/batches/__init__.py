"""The batch APIs' wire formats, sans-IO: what to send to submit, follow and read a batch,
and how to read what comes back (docs/batches.md). Each item's body is the provider's own
non-streamed request, made by its chat stack's codec; each result is read by the same codec."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from metis.core.digits import ascii_digits
from metis.core.surrogates import clean
from metis.errors import ProtocolError
from metis.model.batches import BatchState
from metis.wire import json_limits
from metis.wire.read import shown


@dataclass(frozen=True, slots=True)
class Send:
    """One HTTP request of the batch flow: where, what (JSON, or raw bytes of a type)."""

    method: str
    url: str
    body: dict[str, Any] = field(default_factory=dict)
    content: bytes | None = None
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class RawItem:
    """One result line as the provider gave it: a response body, or an error body with its
    HTTP status, or an outcome with neither (cancelled, expired)."""

    custom_id: str
    outcome: str
    body: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    status: int = 200
    fault: str | None = None

    def __post_init__(self) -> None:  # the provider's echo of the id, a lone surrogate U+FFFD
        object.__setattr__(self, "custom_id", clean(self.custom_id))

    """Why its line could not be read (a ProtocolError of this item); ``custom_id`` is empty
    when the line named none."""


_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*("(?:[^"\\]|\\.)*")')


def jsonl(raw: bytes, where: str, read: Callable[[dict[str, Any]], RawItem]) -> list[RawItem]:
    """Each line of a JSONL results file (blank lines skipped) read by ``read``; a line that
    is not a JSON object, or that ``read`` finds of the wrong shape, is a faulty item: of its
    custom_id when the line's text names one, else of none."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{where} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json_limits.loads(line)
        except ValueError:  # not JSON, or past the limits (never a RecursionError)
            problem = f"not JSON: {shown(line)}"
        else:
            try:
                if not isinstance(value, dict):
                    raise ProtocolError(f"expected an object, got {shown(value)}")
                items.append(read(value))
                continue
            except ProtocolError as exc:
                problem = exc.message
        items.append(RawItem(_named(line), "errored", fault=f"{where} line {number}: {problem}"))
    return items


def _named(line: str) -> str:
    """The custom_id a line that could not be read names, or ''."""
    found = _CUSTOM_ID.search(line)
    try:
        name = json.loads(found[1]) if found else ""
    except ValueError:
        return ""
    return name if isinstance(name, str) else ""


def count_of(value: Any) -> int | None:
    """A batch's count as the provider reports it: a whole number not below zero (proto3 JSON
    sends an int64 as a string), else None, never a count of another type."""
    if value.__class__ is str and ascii_digits(value):
        return int(value)
    return value if value.__class__ is int and value >= 0 else None


def state_of(raw: str, table: dict[str, BatchState]) -> BatchState:
    found = table.get(raw)
    if found is None:
        raise ProtocolError(f"unknown batch status {raw!r} (known: {', '.join(table)})")
    return found
