"""OpenAI's Batch API (platform.openai.com/docs/guides/batch) over Chat Completions or
Responses: the requests uploaded as a JSONL file (``POST /v1/files``, purpose ``batch``), each
line ``{custom_id, method: POST, url, body}``; ``POST /v1/batches {input_file_id, endpoint,
completion_window: 24h}``; ``GET /v1/batches/{id}`` -> ``status`` (``validating``,
``in_progress``, ``finalizing``, ``completed``, ``failed``, ``expired``, ``cancelling``,
``cancelled``), ``output_file_id``, ``error_file_id``; each output line ``{custom_id,
response: {status_code, body}, error}``, read from ``GET /v1/files/{id}/content``.

Azure OpenAI's v1 API serves the same under ``/openai/v1`` (learn.microsoft.com/azure/
ai-foundry/openai/how-to/batch), with ``/chat/completions`` as the items' ``url`` and the
batch's ``endpoint``, and a deployment's name as each body's ``model``. So every request here
is made from ``root``, the URL the ``files`` and ``batches`` resources live under
(``https://api.openai.com/v1``, ``https://{resource}.openai.azure.com/openai/v1``), and
``path``, the items' endpoint as the API names it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from metis.core.url_segment import segment
from metis.errors import ProtocolError
from metis.model.batches import BatchState, BatchStatus
from metis.wire.batches import RawItem, Send, count_of, jsonl, state_of
from metis.wire.read import object_value, required_text, shown

_STATES: dict[str, BatchState] = {
    "validating": "pending",
    "in_progress": "running",
    "finalizing": "running",
    "cancelling": "running",
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


def upload(root: str, path: str, items: list[tuple[str, dict[str, Any]]]) -> Send:
    lines = [
        json.dumps(
            {"custom_id": key, "method": "POST", "url": path, "body": body}, separators=(",", ":")
        )
        for key, body in items
    ]
    boundary = f"metis-{uuid.uuid4().hex}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n',
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="batch.jsonl"\r\n'
        "Content-Type: application/jsonl\r\n\r\n",
    ]
    content = (
        "".join(parts).encode() + "\n".join(lines).encode() + f"\r\n--{boundary}--\r\n".encode()
    )
    return Send(
        "POST",
        f"{root}/files",
        content=content,
        content_type=f"multipart/form-data; boundary={boundary}",
    )


def create(root: str, path: str, file_id: str) -> Send:
    body = {"input_file_id": file_id, "endpoint": path, "completion_window": "24h"}
    return Send("POST", f"{root}/batches", body)


def file_id(answer: dict[str, Any]) -> str:
    return required_text(answer, "id", "file")


def batch_id(answer: dict[str, Any]) -> str:
    return required_text(answer, "id", "batch")


def status_request(root: str, batch: str) -> Send:
    return Send("GET", f"{root}/batches/{segment(batch)}")


def cancel_request(root: str, batch: str) -> Send:
    return Send("POST", f"{root}/batches/{segment(batch)}/cancel")


def read_status(answer: dict[str, Any], provider: str) -> BatchStatus:
    raw = required_text(answer, "status", "batch")
    counts = object_value(answer.get("request_counts") or {}, "request_counts")
    return BatchStatus(
        batch_id(answer),
        provider,
        state_of(raw, _STATES),
        raw,
        count_of(counts.get("total")),
        count_of(counts.get("completed")),
        count_of(counts.get("failed")),
        _errors(answer.get("errors")),
    )


def _errors(listed: Any) -> tuple[str, ...]:
    """A failed batch's ``errors: {data: [{code, message, line}]}`` (its input file did not
    validate), a line each."""
    data = listed.get("data") if isinstance(listed, dict) else None
    found = []
    for error in data if isinstance(data, list) else ():
        if isinstance(error, dict):
            line = error.get("line")
            where = f"line {line}: " if line.__class__ is int else ""
            said = [error.get(key) for key in ("code", "message")]
            found.append(where + ": ".join(s if isinstance(s, str) else shown(s) for s in said))
    return tuple(found)


def results_requests(root: str, answer: dict[str, Any]) -> list[Send]:
    found = [answer.get("output_file_id"), answer.get("error_file_id")]
    named = [f for f in found if isinstance(f, str) and f]
    return [Send("GET", f"{root}/files/{segment(f)}/content") for f in named]


def read_results(raw: bytes) -> list[RawItem]:
    return jsonl(raw, "batch output", _item)


def _item(line: dict[str, Any]) -> RawItem:
    key = required_text(line, "custom_id", "output line")
    response = line.get("response")
    error = line.get("error")
    if isinstance(response, dict):
        status = response.get("status_code")
        body = response.get("body")
        if isinstance(status, int) and status == 200 and isinstance(body, dict):
            return RawItem(key, "succeeded", body)
        if isinstance(body, dict):
            return RawItem(key, "errored", None, body, status if isinstance(status, int) else 500)
    if isinstance(error, dict):
        code = error.get("code")
        outcome = (
            "expired"
            if code == "batch_expired"
            else "cancelled"
            if code == "batch_cancelled"
            else "errored"
        )
        return RawItem(key, outcome, None, {"error": error}, 400)
    raise ProtocolError(f"{key!r}: neither a response nor an error: {shown(line)}")
