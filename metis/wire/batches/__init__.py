"""The batch APIs' wire formats, sans-IO: what to send to submit, follow and read a batch,
and how to read what comes back (docs/batches.md). Each item's body is the provider's own
non-streamed request, made by its chat stack's codec; each result is read by the same codec."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


def jsonl(raw: bytes, where: str) -> list[dict[str, Any]]:
    """The objects of a JSONL file, one a line (blank lines skipped)."""
    out = []
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{where} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json_limits.loads(line)
        except ValueError:  # not JSON, or past the limits (never a RecursionError)
            raise ProtocolError(f"{where} line {number} is not JSON: {shown(line)}") from None
        if not isinstance(value, dict):
            raise ProtocolError(f"{where} line {number}: expected an object, got {shown(value)}")
        out.append(value)
    return out


def state_of(raw: str, table: dict[str, BatchState]) -> BatchState:
    found = table.get(raw)
    if found is None:
        raise ProtocolError(f"unknown batch status {raw!r} (known: {', '.join(table)})")
    return found
