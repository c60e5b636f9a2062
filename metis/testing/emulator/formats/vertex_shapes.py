"""What Vertex AI's Gemini answers carry beside the Gemini API's, as its recordings show
(real-traffic/vertex): each reply (and each streamed chunk) has its ``createTime`` and its
usage's ``trafficType``, and its candidates no ``index``."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

from metis.testing.emulator.formats.gemini import SEPARATORS
from metis.testing.emulator.wire import Frame, JsonReply, dumps


def on_vertex(body: dict[str, Any], created: str) -> dict[str, Any]:
    candidates = [{k: v for k, v in c.items() if k != "index"} for c in body["candidates"]]
    usage = {**body["usageMetadata"], "trafficType": "ON_DEMAND"}
    shaped = {"candidates": candidates, "usageMetadata": usage}
    shaped.update(modelVersion=body["modelVersion"], createTime=created)
    return {**shaped, **{k: v for k, v in body.items() if k not in shaped}}


def created_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def vertex_reply(rendered: Any) -> Any:
    """A whole reply (or the body a stream is made from) as Vertex gives it."""
    if isinstance(rendered, JsonReply):
        return dataclasses.replace(rendered, body=on_vertex(rendered.body, created_now()))
    return rendered


def vertex_frames(frames: list[Frame]) -> list[Frame]:
    """A stream's chunks as Vertex gives them (one creation time for them all)."""
    created = created_now()
    out = []
    for frame in frames:
        if frame.payload:
            chunk = on_vertex(json.loads(frame.payload), created)
            frame = Frame(frame.head, dumps(chunk, SEPARATORS), frame.tail)
        out.append(frame)
    return out
