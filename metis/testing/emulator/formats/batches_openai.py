"""OpenAI's Batch API, simulated (see :mod:`.batches`): ``POST /v1/files`` (a multipart
upload of the JSONL requests), ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, over Chat Completions and
Responses; and Azure OpenAI's, the same under ``/openai/v1`` over ``/chat/completions``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.formats.batches import Batch, polled, run_items, store
from metis.testing.emulator.formats.chat import Chat
from metis.testing.emulator.formats.cloud import AZURE_MOUNT, AzureChat, OnAzure
from metis.testing.emulator.formats.files_upload import form_parts
from metis.testing.emulator.formats.responses import Responses
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.wire import (
    JsonReply,
    now_unix,
    parse_json_object,
    request_ids,
)


def _file(call: Call, file_id: str, param: str) -> bytes:
    """An uploaded file's content; OpenAI's 404 when there is none."""
    with call.env.lock:
        stored = call.env.batches.get(file_id)
    if not isinstance(stored, bytes):
        raise Refused(f"No such File object: {file_id}", param, status=404)
    return stored


def _item(line: bytes) -> dict[str, Any]:
    """One line of a batch file: a JSON object, else a 400 saying why not."""
    try:
        return parse_json_object(line)
    except ValueError as exc:
        raise Refused(str(exc), "input_file_id") from None


class OpenAIBatches(Chat):
    name = "openai"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", r"/v1/files", "upload"),
        ("GET", r"/v1/files/(?P<id>[^/]+)/content", "content"),
        ("POST", r"/v1/batches", "create"),
        ("GET", r"/v1/batches/(?P<id>[^/]+)", "status"),
        ("POST", r"/v1/batches/(?P<id>[^/]+)/cancel", "cancel"),
    )
    endpoints: ClassVar[dict[str, type[Format]]] = {
        "/v1/chat/completions": Chat,
        "/v1/responses": Responses,
    }
    """The batch's ``endpoint`` (each item's ``url``) and the format that answers its items."""
    item_root: ClassVar[str] = ""
    """Where that format serves the ``endpoint`` path."""

    def takes_json(self, endpoint: str) -> bool:
        return endpoint != "upload"

    def parse(self, call: Call) -> None:
        if call.endpoint == "create":
            for key in ("input_file_id", "endpoint", "completion_window"):
                if not isinstance(call.body.get(key), str):
                    raise Refused(f"Missing required parameter: '{key}'.", key)
            if call.body["endpoint"] not in self.endpoints:
                raise Refused(f"Invalid value for 'endpoint': {call.body['endpoint']}", "endpoint")

    def serve(self, call: Call) -> JsonReply | None:
        ids, headers = request_ids(call.request), self.headers(call.request)
        if call.endpoint == "upload":
            parts = form_parts(call.request)
            if "purpose" not in parts:
                raise Refused("'purpose' is a required property", "purpose")
            upload, purpose = parts["file"], parts["purpose"].content.decode()
            file_id = "file-" + ids.token(22)
            with call.env.lock:
                call.env.batches[file_id] = upload.content
            body = {"id": file_id, "object": "file", "bytes": len(upload.content)}
            body.update(filename=upload.filename or "upload", purpose=purpose)
            body.update(created_at=now_unix())
            return JsonReply(200, body, headers)
        if call.endpoint == "content":
            stored = _file(call, call.match["id"], "id")
            return JsonReply(200, raw=stored, headers={"content-type": "application/octet-stream"})
        if call.endpoint != "create":
            batch = polled(call, f"No batch found with id '{call.match['id']}'.")
            return JsonReply(200, self._object(batch, call), headers)
        endpoint, requests = call.body["endpoint"], []
        for line in _file(call, call.body["input_file_id"], "input_file_id").splitlines():
            if line.strip():
                item = _item(line)
                if item.get("url") != endpoint:
                    raise Refused(f"The url of every request must be {endpoint}", "input_file_id")
                key, body = str(item.get("custom_id")), item.get("body") or {}
                requests.append((key, self.item_root + endpoint, body))
        batch = run_items(self.endpoints[endpoint](), call, requests, "batch_" + ids.token(24))
        batch.extra["endpoint"] = endpoint
        return JsonReply(200, self._object(store(call, batch), call), headers)

    def _object(self, batch: Batch, call: Call) -> dict[str, Any]:
        done = batch.finished()
        status = batch.state("validating in_progress cancelled expired completed")
        output = error = None
        if done:
            output, error = self._files(batch, call)
        failed = sum(1 for _, s, b in batch.items if s != 200 or b is None)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.extra.get("endpoint"),
            "completion_window": "24h",
            "status": status,
            "output_file_id": output,
            "error_file_id": error,
            "request_counts": {
                "total": len(batch.items),
                "completed": batch.succeeded if done else 0,
                "failed": failed if done else 0,
            },
        }

    def _files(self, batch: Batch, call: Call) -> tuple[str | None, str | None]:
        out: list[dict[str, Any]] = []
        err: list[dict[str, Any]] = []
        for n, (key, status, body) in enumerate(batch.items):
            line: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": key}
            if body is None or batch.cancelled:
                code = "batch_cancelled" if batch.cancelled else "batch_expired"
                error = {"code": code, "message": f"This request was not executed: {code}."}
                err.append({**line, "response": None, "error": error})
            else:
                line["response"] = {"status_code": status, "request_id": f"req_{n}", "body": body}
                line["error"] = None
                (out if status == 200 else err).append(line)
        names: list[str | None] = []
        for suffix, lines in (("out", out), ("err", err)):
            if not lines:
                names.append(None)
                continue
            name = f"file-{batch.id}-{suffix}"
            with call.env.lock:
                call.env.batches[name] = "\n".join(json.dumps(x) for x in lines).encode() + b"\n"
            names.append(name)
        return names[0], names[1]


class AzureBatches(OnAzure, OpenAIBatches):
    name = "azure"
    routes: ClassVar[Sequence[Route]] = tuple(
        (method, AZURE_MOUNT + "/openai" + path, endpoint)
        for method, path, endpoint in OpenAIBatches.routes
    )
    endpoints: ClassVar[dict[str, type[Format]]] = {"/chat/completions": AzureChat}
    item_root = AZURE_MOUNT + "/openai/v1"
