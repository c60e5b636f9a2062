"""What Bedrock's InvokeModel adds to the Anthropic Messages reply it carries, as the service
sends it: the message id ``msg_bdrk_...`` and the Anthropic model's own name (not the Bedrock
model id), the ``X-Amzn-Bedrock-*`` token counts and latency as headers of a whole reply, and
``amazon-bedrock-invocationMetrics`` in the last chunk of a stream (its content type as
``X-Amzn-Bedrock-Content-Type``). Every Bedrock reply, errors too, names its request in
``x-amzn-RequestId`` (boto3's ``ResponseMetadata.RequestId``)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from metis.model.content import ContentBlock
from metis.testing.emulator.formats.anthropic import message_events
from metis.testing.emulator.wire import HttpRequest, request_uuid

LATENCY_MS = 42  # the latency every emulated Bedrock reply reports (Converse's latencyMs too)
ANTHROPIC_ID = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.(?P<name>.+?)(?:-v\d+(?::\d+)?)?$")
"""A Bedrock model id or cross-region profile (``us.anthropic.claude-...-v1:0``)."""


def request_id(request: HttpRequest) -> dict[str, str]:
    """The ``x-amzn-RequestId`` header: a UUID, distinct per request."""
    return {"x-amzn-RequestId": request_uuid(request)}


def invoke_message(rendered: dict[str, Any], model_id: str) -> dict[str, Any]:
    """The Messages reply as InvokeModel gives it."""
    found = ANTHROPIC_ID.match(model_id)
    model = found["name"] if found else model_id
    message_id = "msg_bdrk_" + str(rendered["id"]).removeprefix("msg_")
    return {**rendered, "id": message_id, "model": model}


def invoke_headers(message: dict[str, Any]) -> dict[str, str]:
    usage = message["usage"]
    return {
        "content-type": "application/json",
        "X-Amzn-Bedrock-Invocation-Latency": str(LATENCY_MS),
        "X-Amzn-Bedrock-Input-Token-Count": str(usage["input_tokens"]),
        "X-Amzn-Bedrock-Output-Token-Count": str(usage["output_tokens"]),
    }


def invoke_chunks(message: dict[str, Any], content: list[ContentBlock]) -> list[dict[str, str]]:
    """The stream's ``chunk`` payloads: each Messages event (but ``ping``) base64-encoded,
    the last with the invocation's metrics (``content``: the message's canonical blocks)."""
    frames = message_events(message, content)
    events = [json.loads(f.payload) for f in frames if b'"ping"' not in f.payload]
    usage = message["usage"]
    events[-1]["amazon-bedrock-invocationMetrics"] = {
        "inputTokenCount": usage["input_tokens"],
        "outputTokenCount": usage["output_tokens"],
        "invocationLatency": LATENCY_MS,
        "firstByteLatency": LATENCY_MS // 2,
    }
    return [{"bytes": base64.b64encode(_compact(event)).decode()} for event in events]


def _compact(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


STREAM_HEADERS = {"X-Amzn-Bedrock-Content-Type": "application/json"}
