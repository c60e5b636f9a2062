"""Gemini API batch mode (ai.google.dev/gemini-api/docs/batch-mode), inline requests:
``POST /v1beta/models/{m}:batchGenerateContent {batch: {display_name, input_config:
{requests: {requests: [{request, metadata: {key}}]}}}}`` -> an operation named
``batches/{id}``; ``GET /v1beta/batches/{id}`` -> ``metadata.state`` (``BATCH_STATE_PENDING``,
``_RUNNING``, ``_SUCCEEDED``, ``_FAILED``, ``_CANCELLED``, ``_EXPIRED``; the SDK's
``JOB_STATE_*`` too) and, when done, ``response.inlinedResponses.inlinedResponses[{response |
error, metadata: {key}}]``; ``POST /v1beta/batches/{id}:cancel``."""

from __future__ import annotations

from typing import Any

from metis.errors import ProtocolError
from metis.model.batches import BatchState, BatchStatus
from metis.wire.batches import RawItem, Send, state_of
from metis.wire.read import object_value, required_text

_STATES: dict[str, BatchState] = {}
for prefix in ("BATCH_STATE_", "JOB_STATE_"):
    _STATES.update(
        {
            prefix + "PENDING": "pending",
            prefix + "RUNNING": "running",
            prefix + "SUCCEEDED": "completed",
            prefix + "FAILED": "failed",
            prefix + "CANCELLED": "cancelled",
            prefix + "EXPIRED": "expired",
        }
    )


def submit(base_url: str, model: str, items: list[tuple[str, dict[str, Any]]]) -> list[Send]:
    requests = [{"request": body, "metadata": {"key": key}} for key, body in items]
    batch = {"display_name": "metis", "input_config": {"requests": {"requests": requests}}}
    return [
        Send("POST", f"{base_url}/v1beta/models/{model}:batchGenerateContent", {"batch": batch})
    ]


def batch_id(answer: dict[str, Any]) -> str:
    name = required_text(answer, "name", "batch operation")
    return name.removeprefix("batches/")


def status_request(base_url: str, batch: str) -> Send:
    return Send("GET", f"{base_url}/v1beta/batches/{batch}")


def cancel_request(base_url: str, batch: str) -> Send:
    return Send("POST", f"{base_url}/v1beta/batches/{batch}:cancel")


def read_status(answer: dict[str, Any], provider: str) -> BatchStatus:
    metadata = object_value(answer.get("metadata") or {}, "metadata")
    raw = metadata.get("state")
    if not isinstance(raw, str):
        raw = "BATCH_STATE_SUCCEEDED" if answer.get("done") else "BATCH_STATE_PENDING"
    stats = object_value(metadata.get("batchStats") or {}, "batchStats")
    return BatchStatus(
        batch_id(answer),
        provider,
        state_of(raw, _STATES),
        raw,
        _int(stats.get("requestCount")),
        _int(stats.get("successfulRequestCount")),
        _int(stats.get("failedRequestCount")),
    )


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None  # proto3 JSON sends int64 as a string
    except (TypeError, ValueError):
        return None


def read_results(answer: dict[str, Any]) -> list[RawItem]:
    response = (
        answer.get("response")
        or object_value(answer.get("metadata") or {}, "metadata").get("output")
        or {}
    )
    inlined = object_value(response, "response").get("inlinedResponses") or {}
    found = object_value(inlined, "inlinedResponses").get("inlinedResponses") or []
    if not isinstance(found, list):
        raise ProtocolError("inlinedResponses.inlinedResponses: expected a list")
    items = []
    for i, item in enumerate(found):
        item = object_value(item, f"inlinedResponses[{i}]")
        key = object_value(item.get("metadata") or {}, "metadata").get("key")
        if not isinstance(key, str):
            raise ProtocolError(f"inlinedResponses[{i}].metadata.key: expected the request's key")
        if isinstance(item.get("response"), dict):
            items.append(RawItem(key, "succeeded", item["response"]))
        else:
            error = object_value(item.get("error") or {}, f"inlinedResponses[{i}].error")
            code = error.get("code")
            items.append(
                RawItem(
                    key, "errored", None, {"error": error}, code if isinstance(code, int) else 500
                )
            )
    return items
