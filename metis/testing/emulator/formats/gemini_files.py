"""The Gemini API's Files API upload, resumable as ``google-genai``'s ``client.files.upload``
sends it: ``POST /upload/v1beta/files`` with ``X-Goog-Upload-Command: start`` and the file's
metadata (``{"file": {"mimeType", "displayName"}}``) answers an ``x-goog-upload-url``; the
bytes go there in chunks (``upload``), the last one ``upload, finalize``, whose answer is the
``File`` (``name: files/{id}``, ``uri``, ``state: ACTIVE``) a request then names in a
``fileData`` part. Source: ai.google.dev/api/files (media.upload, the resumable protocol)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.batches import origin
from metis.testing.emulator.formats.gemini import Gemini, google_json
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.wire import HttpRequest, JsonReply, request_ids

PENDING = "gemini-upload:"
"""The key prefix of an upload begun and not finalized, in ``env.batches``."""
CREATED = "2026-01-01T00:00:00.000000Z"
EXPIRES = "2026-01-03T00:00:00.000000Z"  # files are kept 48 hours


class GeminiFiles(Gemini):
    name = "gemini"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", r"/upload/(?P<version>v1beta|v1)/files", "upload"),
    )

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        if request.query.get("upload_id"):
            return None  # the upload URL is the credential: the chunks carry no key
        return super().authenticate(request, keys)

    def takes_json(self, endpoint: str) -> bool:
        return False  # the metadata is JSON, the chunks are the file's bytes

    def parse(self, call: Call) -> None:
        return None

    def serve(self, call: Call) -> JsonReply | None:
        command = (call.request.header("x-goog-upload-command") or "").replace(" ", "")
        if command == "start":
            return self._start(call)
        upload_id = call.request.query.get("upload_id", "")
        with call.env.lock:
            pending = call.env.batches.get(PENDING + upload_id)
            if not isinstance(pending, dict):
                raise Refused(f"Upload {upload_id!r} was not started", status=404)
            pending["content"] += call.request.body
        if command == "upload":
            return JsonReply(200, raw=b"", headers={"x-goog-upload-status": "active"})
        if command != "upload,finalize":
            raise Refused(f"Unknown X-Goog-Upload-Command: {command!r}")
        with call.env.lock:
            del call.env.batches[PENDING + upload_id]
        reply = google_json({"file": _file(call, pending)})
        reply.headers["x-goog-upload-status"] = "final"
        return reply

    def _start(self, call: Call) -> JsonReply:
        try:
            metadata = json.loads(call.request.body or b"{}").get("file") or {}
        except (ValueError, AttributeError):
            raise Refused("Invalid JSON payload received.") from None
        upload_id = request_ids(call.request).token(40)
        metadata = {_camel(key): value for key, value in metadata.items()}  # either spelling
        metadata.setdefault("mimeType", call.request.header("x-goog-upload-header-content-type"))
        with call.env.lock:
            call.env.batches[PENDING + upload_id] = {"metadata": metadata, "content": b""}
        version = call.match["version"]
        url = f"{origin(call.request)}/upload/{version}/files?upload_id={upload_id}"
        headers = {"x-goog-upload-url": url, "x-goog-upload-status": "active"}
        return JsonReply(200, raw=b"", headers=headers)


def _file(call: Call, pending: dict[str, Any]) -> dict[str, Any]:
    metadata, content = pending["metadata"], pending["content"]
    name = str(metadata.get("name") or "files/" + request_ids(call.request).token(12, "lower"))
    version = call.match["version"]
    found: dict[str, Any] = {
        "name": name,
        "mimeType": metadata.get("mimeType") or "application/octet-stream",
        "sizeBytes": str(len(content)),
        "createTime": CREATED,
        "updateTime": CREATED,
        "expirationTime": EXPIRES,
        "uri": f"https://generativelanguage.googleapis.com/{version}/{name}",
        "state": "ACTIVE",
        "source": "UPLOADED",
    }
    if metadata.get("displayName"):
        found["displayName"] = metadata["displayName"]
    return found


def _camel(key: str) -> str:
    """A protobuf JSON field name as Google writes it (``mime_type`` is ``mimeType``)."""
    head, *rest = key.split("_")
    return head + "".join(word.title() for word in rest)
