"""Anthropic Messages API: ``POST /v1/messages``, ``/v1/messages/count_tokens``, and
``GET /v1/models`` (a request with an ``anthropic-version`` header).

Auth: ``x-api-key``, or ``Authorization: Bearer`` as the 2.x SDK sends it (401
``authentication_error`` without either), and a known ``anthropic-version`` (400 without). The
400 rules are ``tables/anthropic.yaml`` and the checks of :mod:`.anthropic_rules`. Streams are
``event:`` + ``data:`` SSE with a ``ping`` after the first block starts, some ``data:`` lines
padded with trailing spaces (as recorded), tool input in ``input_json_delta`` fragments after an
empty one, and usage in ``message_start`` and ``message_delta``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from metis.gateway.anthropic_api import read_messages
from metis.gateway.anthropic_write import MessageStream, write_message
from metis.histories.blocks import from_anthropic_block
from metis.model.content import ContentBlock, OpaqueBlock, TextBlock, ThinkingBlock, ToolUseBlock
from metis.model.events import (
    MessageComplete,
)
from metis.model.response import ServerToolRequests, StopKind, StopReason, TokenUsage
from metis.model.tier import service_tier
from metis.testing.emulator.formats.anthropic_rules import RULES, SIGNATURE_KIND, _blocks
from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.formats.cache_marks import block_counts, unmarked
from metis.testing.emulator.formats.canonical_events import block_events, response_of
from metis.testing.emulator.formats.canonical_turns import prompt_of, read_by
from metis.testing.emulator.formats.compaction import (
    anthropic_block,
    anthropic_compacted_usage,
    anthropic_trigger,
    read_breakpoints,
    read_tokens,
)
from metis.testing.emulator.formats.document_citations import anthropic_document_citations
from metis.testing.emulator.formats.knobs_rules import thinking_shown
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.server_tools import anthropic_blocks, anthropic_citations
from metis.testing.emulator.wire import (
    Frame,
    HttpRequest,
    Ids,
    JsonReply,
    dumps,
    request_ids,
    signature,
    sse,
)
from metis.wire.anthropic.server_tools import citation

ORGANIZATION = "6c5b7a38-2f4e-4bd1-9a54-000000e30a70"
VERSIONS = frozenset({"2023-06-01", "2023-01-01", "2026-10-21"})
ERRORS = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed your organization's rate limit of 50 requests per minute. "
        "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "server_error": (500, "api_error", "Internal server error"),
    "auth": (401, "authentication_error", "invalid x-api-key"),
    "out_of_credit": (
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits.",
    ),
}


class Anthropic(Format):
    name = "anthropic"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", "/v1/messages", "messages"),
        ("POST", "/v1/messages/count_tokens", "count_tokens"),
        ("GET", "/v1/models", "models"),
        ("GET", "/v1/models/(?P<model>[^/]+)", "model"),
    )
    rules = RULES
    catalog: ClassVar[tuple[str, ...]] = ("anthropic",)
    too_long = "prompt is too long: {tokens} tokens > {limit} maximum"
    no_model = (404, "model: {model}")

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        return not endpoint.startswith("model") or request.header("anthropic-version") is not None

    def error(
        self, status: int, kind: str, message: str, request: HttpRequest, code: str | None = None
    ) -> JsonReply:
        """``code``: the error's ``details.error_code``, where Anthropic gives one."""
        headers = self.headers(request)
        if status in (408, 409, 429) or status >= 500:
            headers["x-should-retry"] = "true"
        error: dict[str, Any] = {"type": kind, "message": message}
        if code is not None:
            error["details"] = {"error_code": code}
        body = {"type": "error", "error": error}
        return JsonReply(status, {**body, "request_id": headers["request-id"]}, headers)

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        key = request.header("x-api-key") or request.bearer()
        version = request.header("anthropic-version")
        if not key:
            message = "x-api-key header is required"
        elif keys is not None and key not in keys:
            message = "invalid x-api-key"
        elif not version:
            return self.error(
                400, "invalid_request_error", "anthropic-version: header is required", request
            )
        elif version not in VERSIONS:
            message = f"anthropic-version: invalid version {version!r}"
            return self.error(400, "invalid_request_error", message, request)
        else:
            return None
        return self.error(401, "authentication_error", message, request)

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        kind = {404: "not_found_error", 413: "request_too_large"}.get(
            refused.status, "invalid_request_error"
        )
        return self.error(refused.status, kind, refused.message, request, refused.code)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "context_overflow":
            return self.refusal(self.overflow(208367, 200000), request)
        reply = self.error(*ERRORS[kind], request)
        if kind == "rate_limit":
            reply.headers["retry-after"] = f"{retry_after:g}"
            reply.headers["anthropic-ratelimit-requests-limit"] = "50"
            reply.headers["anthropic-ratelimit-requests-remaining"] = "0"
        return reply

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        _, error_type, message = ERRORS.get(kind, ERRORS["overloaded"])
        payload = {"type": "error", "error": {"type": error_type, "message": message}}
        return [sse({**payload, "request_id": self.headers(call.request)["request-id"]}, "error")]

    def headers(self, request: HttpRequest) -> dict[str, str]:
        request_id = "req_011C" + request_ids(request).token(20, "b58")
        return {"request-id": request_id, "anthropic-organization-id": ORGANIZATION}

    def stream_headers(self, call: Call) -> dict[str, str]:
        return {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}

    def parse(self, call: Call) -> None:
        if call.endpoint == "count_tokens":
            call.body.setdefault("max_tokens", 1)
        super().parse(call)

    def serve(self, call: Call) -> JsonReply | None:
        if call.endpoint == "count_tokens":
            tokens = self.read(call).tokens
            return JsonReply(200, {"input_tokens": tokens}, self.headers(call.request))
        if not call.endpoint.startswith("model"):
            return None
        listed = [
            {
                "type": "model",
                "id": m.id,
                "display_name": m.name,
                "created_at": f"{m.released}T00:00:00Z",
            }
            for m in self.models(call, self.catalog)
        ]
        if call.endpoint == "model":
            return JsonReply(200, listed[0], self.headers(call.request))
        first, last = (listed[0]["id"], listed[-1]["id"]) if listed else (None, None)
        page = {"data": listed, "has_more": False, "first_id": first, "last_id": last}
        return JsonReply(200, page, self.headers(call.request))

    # --- the request ----------------------------------------------------------------------

    def read(self, call: Call) -> Prompt:
        body = call.body
        breakpoints: set[int] = set()
        system = body.get("system") or ""
        if isinstance(system, list) and any("cache_control" in b for b in system):
            breakpoints.add(0)
        if any("cache_control" in tool for tool in body.get("tools") or []):
            breakpoints.add(0)
        for i, message in enumerate(body["messages"]):
            if any("cache_control" in b for b in _blocks(message)):
                breakpoints.add(i + 1)
        # the gateway's reader wants an output limit; the rules checked this one already
        inbound = read_by(read_messages, {**body, "max_tokens": body.get("max_tokens") or 1})
        prompt = prompt_of(
            inbound,
            call.model,
            thinking=(body.get("thinking") or {}).get("type") in ("enabled", "adaptive"),
            max_tokens=body["max_tokens"],
            breakpoints=sorted(breakpoints) or None,
            segment_blocks=block_counts(body["messages"]),
            provider=self.name,
            items=body["messages"],
        )
        prompt.segments = [dumps(unmarked(body.get("tools") or [])).decode() + prompt.system]
        prompt.segments += [dumps(unmarked(m)).decode() for m in body["messages"]]
        return prompt

    def cached(self, call: Call, prompt: Prompt, reply: Reply) -> None:
        breakpoints, blocks = read_breakpoints(prompt)  # from the latest compaction block on
        if breakpoints:
            read, written = call.env.cache.explicit(
                self.name, prompt.read_segments(), breakpoints, blocks
            )
            reply.usage.cache_read, reply.usage.cache_write = read, written

    # --- the reply ------------------------------------------------------------------------

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> dict[str, Any]:
        content: list[ContentBlock] = []
        if reply.thinking:
            shown = reply.thinking if thinking_shown(call.body) else ""
            sig = signature(SIGNATURE_KIND, shown)
            content.append(ThinkingBlock(thinking=shown, signature=sig))
        for server in reply.server:
            blocks = anthropic_blocks(server, "srvtoolu_01" + ids.token(22, "b58"))
            content += [canonical(b) for b in blocks]
        if reply.text:
            documents = anthropic_document_citations(call.body) if reply.cite else []
            cited = [citation(c) for c in [*anthropic_citations(reply), *documents]]
            content.append(TextBlock(text=reply.text, citations=cited or None))
        for out in reply.calls:
            tool_id = call.call_id(ids, "toolu_01", 22, "b58")
            content.append(ToolUseBlock(id=tool_id, name=out.name, input=out.args))
        trigger = anthropic_trigger(call.body)
        compacted = trigger is not None and read_tokens(prompt) >= trigger
        block = anthropic_block(prompt) if compacted else None
        if block is not None:
            content.insert(0, canonical(block))
        response = call.options["response"] = response_of(reply, content, call.model)
        details = {
            "output_tokens_details": {"thinking_tokens": reply.usage.thinking_tokens},
            "service_tier": "standard",  # the tier Anthropic says it served
        }
        rendered = write_message(response, call.model, "msg_01" + ids.token(22, "b58"), details)
        if block is not None:  # the passes apart; the top-level counts are the message pass's
            rendered["usage"] = anthropic_compacted_usage(prompt, rendered["usage"], block)
        return rendered

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        return message_events(rendered, call.options["response"].content)


def canonical(block: dict[str, Any]) -> ContentBlock:
    """One of Anthropic's own blocks (a server tool's, a compaction block), kept as it is."""
    found = from_anthropic_block(block, block["type"], "content", {}, None)
    assert found is not None
    return found


def message_events(message: dict[str, Any], content: list[ContentBlock]) -> list[Frame]:
    """A rendered message (``content`` its blocks) as the Messages API streams it (the
    gateway's writer), with some ``data:`` lines padded as recorded."""
    usage = message["usage"]
    more = {k: usage[k] for k in ("output_tokens_details", "iterations") if k in usage}
    tokens = TokenUsage(
        input_tokens=usage["input_tokens"],
        cached_input_tokens=usage["cache_read_input_tokens"],
        cache_creation_input_tokens=usage["cache_creation_input_tokens"],
        output_tokens=usage["output_tokens"],
        server_tools=ServerToolRequests(
            web_search=(ran := usage.get("server_tool_use", {})).get("web_search_requests", 0),
            web_fetch=ran.get("web_fetch_requests", 0),
        ),
    )
    tier = service_tier(usage.get("service_tier"))
    opening = tokens.model_copy(
        update={"output_tokens": 1, "server_tools": ServerToolRequests(), "service_tier": tier}
    )
    writer = MessageStream(message["model"], None, message["id"], opening, more)
    written = b""
    for index, block in enumerate(content):
        if isinstance(block, OpaqueBlock):  # a compaction block
            written += writer.kept(block)
        for item in block_events(index, block, empty_input=False):
            written += writer.feed(item)
    details = message.get("stop_details") or {}
    stop = StopReason(
        kind=StopKind(message["stop_reason"]),
        sequence=message["stop_sequence"],
        category=details.get("category"),
        explanation=details.get("explanation"),
    )
    written += writer.feed(MessageComplete([], stop, tokens))
    frames: list[Frame] = []
    for event in written.split(b"\n\n")[:-1]:
        head, _, payload = event.partition(b"data: ")
        pad = 0 if head == b"event: ping\n" else (len(frames) * 7) % 13
        frames.append(Frame(head + b"data: ", payload, b" " * pad + b"\n\n"))
    return frames
