"""A Files API upload: the multipart form both OpenAI's (``POST /v1/files``, with the
batches in :mod:`.batches_openai`) and Anthropic's (``POST /v1/files`` with an
``anthropic-version`` header, beta ``files-api-2025-04-14``) take, and Anthropic's answer: a
``file_...`` id its Messages API reads a document by."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from metis.testing.emulator.formats.anthropic import Anthropic
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.wire import HttpRequest, JsonReply, now_unix, request_ids

_DISPOSITION = re.compile(rb'name="(?P<name>[^"]*)"(?:;\s*filename="(?P<filename>[^"]*)")?')
_TYPE = re.compile(rb"content-type:\s*(?P<type>[^\r\n;]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    """One field of a multipart form: its content, and the file's name and type if a file."""

    content: bytes
    filename: str | None = None
    media_type: str | None = None


def form_parts(request: HttpRequest) -> dict[str, Part]:
    """The fields of a ``multipart/form-data`` body by name; a 400 when it is not one."""
    found = re.search(r"boundary=([^;]+)", request.header("content-type") or "")
    if found is None:
        raise Refused("expected a multipart/form-data upload", "file")
    boundary = b"--" + found.group(1).strip('"').encode()
    parts: dict[str, Part] = {}
    for chunk in request.body.split(boundary):
        head, _, content = chunk.partition(b"\r\n\r\n")
        named = _DISPOSITION.search(head)
        if named is None:
            continue
        kind = _TYPE.search(head)
        parts[named["name"].decode()] = Part(
            content.removesuffix(b"\r\n"),
            named["filename"].decode() if named["filename"] is not None else None,
            kind["type"].decode().strip() if kind is not None else None,
        )
    if "file" not in parts:
        raise Refused("'file' is a required property", "file")
    return parts


class AnthropicFiles(Anthropic):
    """Anthropic's Files API upload; OpenAI's, at the same path, answers the rest."""

    routes: ClassVar[Sequence[Route]] = (("POST", r"/v1/files", "upload"),)

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        return request.header("anthropic-version") is not None

    def takes_json(self, endpoint: str) -> bool:
        return False

    def serve(self, call: Call) -> JsonReply | None:
        upload = form_parts(call.request)["file"]
        file_id = "file_011C" + request_ids(call.request).token(20, "b58")
        created = datetime.fromtimestamp(now_unix(), UTC).isoformat().replace("+00:00", "Z")
        body = {
            "id": file_id,
            "type": "file",
            "filename": upload.filename or "upload",
            "mime_type": upload.media_type or "application/octet-stream",
            "size_bytes": len(upload.content),
            "created_at": created,
            "downloadable": False,
        }
        return JsonReply(200, body, self.headers(call.request))
