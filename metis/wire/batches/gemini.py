"""Gemini API batch mode (ai.google.dev/gemini-api/docs/batch-mode), inline requests:
``POST /v1beta/models/{m}:batchGenerateContent {batch: {display_name, input_config:
{requests: {requests: [{request, metadata: {key}}]}}}}`` -> an operation named
``batches/{id}``; ``GET /v1beta/batches/{id}`` -> ``metadata.state`` (``BATCH_STATE_PENDING``,
``_RUNNING``, ``_SUCCEEDED``, ``_FAILED``, ``_CANCELLED``, ``_EXPIRED``; the SDK's
``JOB_STATE_*`` too) and, when done, ``response.inlinedResponses.inlinedResponses[{response |
error, metadata: {key}}]``; ``POST /v1beta/batches/{id}:cancel``."""

from __future__ import annotations

from typing import Any

from metis.core.url_segment import segment
from metis.errors import CapabilityError, ProtocolError
from metis.model.batches import BatchState, BatchStatus
from metis.wire.batches import RawItem, Send, count_of, state_of
from metis.wire.read import object_value, required_text, shown

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
    url = f"{base_url}/v1beta/models/{segment(model)}:batchGenerateContent"
    return [Send("POST", url, {"batch": batch})]


def batch_id(answer: dict[str, Any]) -> str:
    name = required_text(answer, "name", "batch operation")
    return name.removeprefix("batches/")


def status_request(base_url: str, batch: str) -> Send:
    return Send("GET", f"{base_url}/v1beta/batches/{segment(batch)}")


def cancel_request(base_url: str, batch: str) -> Send:
    return Send("POST", f"{base_url}/v1beta/batches/{segment(batch)}:cancel")


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
        count_of(stats.get("requestCount")),
        count_of(stats.get("successfulRequestCount")),
        count_of(stats.get("failedRequestCount")),
        _error(answer.get("error")),
    )


def _error(error: Any) -> tuple[str, ...]:
    """A failed operation's ``error: {code, message}`` (google.rpc.Status)."""
    message = error.get("message") if isinstance(error, dict) else None
    return (message,) if isinstance(message, str) and message else ()


def read_results(answer: dict[str, Any]) -> list[RawItem]:
    """Each inlined response as its item; one of the wrong shape is a faulty item (of no key
    when it names none: metis.adapter.batches raises for those, keeping the others)."""
    response = (
        answer.get("response")
        or object_value(answer.get("metadata") or {}, "metadata").get("output")
        or {}
    )
    response = object_value(response, "response")
    if response.get("responsesFile"):
        raise CapabilityError(
            f"the batch's results are a file ({shown(response['responsesFile'])}): metis reads "
            "the inline results of batches sent inline, as it sends them"
        )
    inlined = response.get("inlinedResponses") or {}
    found = object_value(inlined, "inlinedResponses").get("inlinedResponses") or []
    if not isinstance(found, list):
        raise ProtocolError("inlinedResponses.inlinedResponses: expected a list")
    items = []
    for i, item in enumerate(found):
        where = f"inlinedResponses[{i}]"
        try:
            items.append(_item(object_value(item, where), where))
        except ProtocolError as exc:
            metadata = item.get("metadata") if isinstance(item, dict) else None
            key = metadata.get("key") if isinstance(metadata, dict) else None
            named = key if isinstance(key, str) else ""
            items.append(RawItem(named, "errored", fault=f"batch results {exc.message}"))
    return items


def _item(item: dict[str, Any], where: str) -> RawItem:
    key = object_value(item.get("metadata") or {}, f"{where}.metadata").get("key")
    if not isinstance(key, str):
        raise ProtocolError(f"{where}.metadata.key: expected the request's key")
    if isinstance(item.get("response"), dict):
        return RawItem(key, "succeeded", item["response"])
    error = object_value(item.get("error") or {}, f"{where}.error")
    code = error.get("code")
    return RawItem(key, "errored", None, {"error": error}, code if isinstance(code, int) else 500)
