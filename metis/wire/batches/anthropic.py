"""Anthropic Message Batches (docs.anthropic.com/en/api/creating-message-batches):
``POST /v1/messages/batches {requests: [{custom_id, params}]}``; ``GET
/v1/messages/batches/{id}`` -> ``processing_status`` (``in_progress``, ``canceling``,
``ended``), ``request_counts``, ``results_url``; the results a JSONL file of ``{custom_id,
result: {type: succeeded, message} | {type: errored, error} | {type: canceled} | {type:
expired}}`` in any order; ``POST .../{id}/cancel``."""

from __future__ import annotations

from typing import Any

from metis.core.url_segment import segment
from metis.errors import ProtocolError
from metis.model.batches import BatchState, BatchStatus
from metis.wire.batches import RawItem, Send, count_of, jsonl, state_of
from metis.wire.read import object_value, required_text

_STATES: dict[str, BatchState] = {
    "in_progress": "running",
    "canceling": "running",
    "ended": "completed",
}
_OUTCOMES = {
    "succeeded": "succeeded",
    "errored": "errored",
    "canceled": "cancelled",
    "expired": "expired",
}
_STATUS_OF_ERROR = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status Anthropic gives each error type (docs.anthropic.com/en/api/errors): a result
line carries the type alone, and the item's error is read as that response would be."""


def submit(base_url: str, items: list[tuple[str, dict[str, Any]]]) -> list[Send]:
    requests = [{"custom_id": key, "params": body} for key, body in items]
    return [Send("POST", f"{base_url}/v1/messages/batches", {"requests": requests})]


def status_request(base_url: str, batch_id: str) -> Send:
    return Send("GET", f"{base_url}/v1/messages/batches/{segment(batch_id)}")


def cancel_request(base_url: str, batch_id: str) -> Send:
    return Send("POST", f"{base_url}/v1/messages/batches/{segment(batch_id)}/cancel")


def batch_id(answer: dict[str, Any]) -> str:
    return required_text(answer, "id", "message batch")


def read_status(answer: dict[str, Any], provider: str) -> BatchStatus:
    counts = object_value(answer.get("request_counts") or {}, "request_counts")
    raw = required_text(answer, "processing_status", "message batch")
    state = state_of(raw, _STATES)
    if state == "completed" and not counts.get("succeeded") and counts.get("expired"):
        state = "expired"
    elif state == "completed" and not counts.get("succeeded") and counts.get("canceled"):
        state = "cancelled"
    total = sum(count_of(v) or 0 for v in counts.values())
    failed = sum(count_of(counts.get(k)) or 0 for k in ("errored", "canceled", "expired"))
    succeeded = count_of(counts.get("succeeded"))
    return BatchStatus(batch_id(answer), provider, state, raw, total, succeeded, failed)


def results_request(base_url: str, answer: dict[str, Any]) -> Send | None:
    """``GET /v1/messages/batches/{id}/results`` from the adapter's base URL once the batch
    names a ``results_url`` (the same resource): a URL an answer names is not sent the key
    when it is another origin (a proxy's base URL, an answer not Anthropic's), as a redirect
    to one is not (metis/transport/redirects.py)."""
    url = answer.get("results_url")
    if not (isinstance(url, str) and url):
        return None
    return Send("GET", f"{base_url}/v1/messages/batches/{segment(batch_id(answer))}/results")


def read_results(raw: bytes) -> list[RawItem]:
    return jsonl(raw, "message batch results", _item)


def _item(line: dict[str, Any]) -> RawItem:
    key = required_text(line, "custom_id", "result line")
    result = object_value(line.get("result"), "result")
    kind = result.get("type")
    if not isinstance(kind, str) or kind not in _OUTCOMES:
        raise ProtocolError(f"result of {key!r}: unknown type {kind!r}")
    message = result.get("message")
    error = result.get("error")
    return RawItem(
        key,
        _OUTCOMES[kind],
        message if isinstance(message, dict) else None,
        error if isinstance(error, dict) else None,
        _status_of(error),
    )


def _status_of(error: object) -> int:
    """The status of ``{type: error, error: {type: api_error, ...}}``, 400 when unknown."""
    inner = error.get("error") if isinstance(error, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    return _STATUS_OF_ERROR.get(kind, 400) if isinstance(kind, str) else 400
