"""The pass-through relay of the OpenAI Responses API (docs/gateway.md "Pass-through"): the
provider's answer handed to the caller with only what the gateway owns changed, in the
``response`` objects of the lifecycle events (``response.created``, ``response.in_progress``,
``response.completed`` ...) and of a whole answer: the model named as the caller named it,
``previous_response_id`` as the caller gave it (the gateway may have sent the conversation
instead), and the usage, the stop and the output items read on the way (for the key's budget,
the metrics, and the gateway's store of conversations). Every other event (the deltas, the
output items) goes through as it came, unparsed. Sans-IO: bytes in, bytes out.
"""

from __future__ import annotations

from typing import Any

from metis.gateway.json_text import utf8
from metis.gateway.relay import Relay, _error_type, _fields, read_as_translated
from metis.gateway.sse import dumps, event, new_id
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.json_limits import loads
from metis.wire.openai_responses.read import read_usage as read_responses_usage

LIFECYCLE = (
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "response.queued",
)
NAMES = frozenset(name.encode() for name in (*LIFECYCLE, "error"))
ENDED = frozenset({"response.completed", "response.incomplete"})
_INCOMPLETE = {"max_output_tokens": StopKind.MAX_TOKENS, "content_filter": StopKind.CONTENT_FILTER}


def responses_usage(raw: Any, output: Any = None, tier: Any = None) -> TokenUsage:
    """Responses API usage, as the translated path reads it (cache writes apart), with the
    web and file searches of the response's ``output`` items counted and its ``service_tier``."""
    items = output if isinstance(output, list) else []
    kinds = [i["type"] for i in items if isinstance(i, dict) and isinstance(i.get("type"), str)]

    def read(builder: MessageBuilder, usage: dict[str, Any]) -> None:
        read_responses_usage(builder, usage, kinds)
        builder.usage(service_tier=service_tier(tier))

    return read_as_translated(read, raw)


def stop_of(response: dict[str, Any]) -> StopReason | None:
    """How a finished response stopped (None: it has not)."""
    status = response.get("status")
    if status == "completed":
        output = response.get("output")
        items = output if isinstance(output, list) else []
        called = any(isinstance(i, dict) and i.get("type") == "function_call" for i in items)
        return StopReason(kind=StopKind.TOOL_USE if called else StopKind.END_TURN, raw=status)
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        raw = reason if isinstance(reason, str) else status
        return StopReason(kind=_INCOMPLETE.get(raw, StopKind.PROVIDER_SPECIFIC), raw=raw)
    return None


class ResponsesRelay(Relay):
    """A Responses API answer. ``previous`` is the ``previous_response_id`` the caller gave
    (None: the one the provider echoes is the caller's own). ``output`` is the finished
    response's output items; ``final`` the whole finished response, as the caller got it;
    ``response_id`` the provider's id of it."""

    markers = tuple(f"event: {name}".encode() for name in (*LIFECYCLE, "error"))

    def __init__(self, model: str, previous: str | None) -> None:
        super().__init__(model)
        self.previous = previous
        self.response_id: str | None = None
        self.output: list[Any] | None = None
        self.final: dict[str, Any] | None = None
        self.events = 0
        """Events relayed so far: the ``sequence_number`` of one the gateway adds."""

    def feed(self, chunk: bytes) -> bytes:
        out = super().feed(chunk)
        self.events += out.count(b"\n\n")
        return out

    def rewrite(self, raw: bytes) -> bytes:
        first = raw.split(b"\n", 1)[0]
        if first.startswith(b"event:") and first[6:].strip() not in NAMES:
            return raw + b"\n\n"  # a delta, an item: nothing of the gateway's, left unparsed
        name, obj = _fields(raw)
        if not isinstance(obj, dict):
            return raw + b"\n\n"
        response = obj.get("response")
        if name in LIFECYCLE and isinstance(response, dict):
            self._read(response, ended=name in ENDED)
            if name == "response.failed":
                self.failed = _error_type({"error": response.get("error")})
            return event(name, obj)
        if name == "error":
            self.failed = _error_type(obj)
        return raw + b"\n\n"

    def _read(self, response: dict[str, Any], ended: bool) -> None:
        """The gateway's part of a ``response`` object: read what it reports, name the
        caller's model and previous response."""
        response["model"] = self.model
        if self.previous is not None:
            response["previous_response_id"] = self.previous
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        if isinstance(response.get("usage"), dict):
            tier = response.get("service_tier")
            self.usage = responses_usage(response["usage"], response.get("output"), tier)
        if ended:
            self.stop = stop_of(response)
            output = response.get("output")
            self.output = output if isinstance(output, list) else []
            self.final = response

    def whole(self, body: bytes) -> bytes:
        obj = loads(body)
        if not isinstance(obj, dict):
            return body
        self._read(obj, ended=True)
        return utf8(dumps(obj))

    def failure(self, code: str, message: str) -> bytes:
        """The event that ends a stream the gateway cut (its deadline, a network failure):
        ``response.failed``, as the API ends a response that failed."""
        response: dict[str, Any] = {
            "id": self.response_id or new_id("resp_"),  # cut before the provider named it
            "object": "response",
            "status": "failed",
            "error": {"code": code, "message": message},
            "model": self.model,
            "output": [],
        }
        failed = {"type": "response.failed", "sequence_number": self.events, "response": response}
        return event("response.failed", failed)
