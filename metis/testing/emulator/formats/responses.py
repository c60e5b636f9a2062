"""OpenAI Responses API: ``POST /v1/responses``, ``/v1/responses/input_tokens`` and
``/v1/responses/compact`` (compaction: :mod:`.compaction`).

Auth as Chat (Bearer); the 400 rules are ``tables/responses.yaml`` and the checks of
:mod:`.responses_rules`. Responses are stored unless ``store: false``, for
``previous_response_id``. The reply and its stream are written by the gateway's writer
(:mod:`metis.gateway.responses_api`), with the ids drawn here and ``obfuscation`` on the
deltas. Reasoning appears when the request has ``reasoning`` or a reasoning
model (its summary when ``reasoning.summary`` is set, ``encrypted_content`` when ``include``
asks for it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar

from metis.gateway.inbound import Inbound
from metis.gateway.responses_api import ResponseStream
from metis.gateway.responses_items import (
    RESPONSES,
    echo_of,
    output_items,
    refusal_item,
    response_object,
)
from metis.gateway.responses_read import read_responses
from metis.histories.blocks import opaque
from metis.model.content import ContentBlock, OpaqueBlock, TextBlock, ThinkingBlock, ToolUseBlock
from metis.model.events import MessageComplete, StreamEvent, ThinkingDelta
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.canonical_events import block_events, response_of
from metis.testing.emulator.formats.canonical_turns import prompt_of, read_by
from metis.testing.emulator.formats.compaction import (
    compacted_response,
    read_tokens,
    responses_item,
    responses_threshold,
)
from metis.testing.emulator.formats.openai import REASONING_MODEL, STREAM_ERRORS, OpenAI
from metis.testing.emulator.formats.responses_rules import (
    COMPACT_RULES,
    COUNT_RULES,
    RULES,
    encrypt,
    items_of,
)
from metis.testing.emulator.formats.server_openai import (
    citations,
    responses_items,
)
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.rules import check
from metis.testing.emulator.wire import (
    Frame,
    Ids,
    JsonReply,
    dumps,
    object_at,
    split_text,
    sse,
)

MAX_STORED = 1000


FAILED = (
    "An error occurred while processing your request. You can retry your request, or contact us "
    "through our help center."
)


class Responses(OpenAI):
    name = "openai_responses"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", "/v1/responses", "responses"),
        ("POST", "/v1/responses/input_tokens", "input_tokens"),
        ("POST", "/v1/responses/compact", "compact"),
    )
    rules = RULES
    window = 400_000
    too_long = (
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again."
    )
    too_long_named = ("input", "context_length_exceeded")
    no_model = (400, "The requested model '{model}' does not exist.")
    no_model_named = ("model", "model_not_found")

    def parse(self, call: Call) -> None:
        if call.endpoint in ("input_tokens", "compact"):
            rules = COUNT_RULES if call.endpoint == "input_tokens" else COMPACT_RULES
            check(rules, call.body, call)
            call.model = call.body["model"]
        else:
            super().parse(call)

    def serve(self, call: Call) -> JsonReply | None:
        if call.endpoint not in ("input_tokens", "compact"):
            return None
        if not self.serves(call.env, call.model):
            raise self.unknown_model(call.model)
        prompt = self.read(call)
        tokens = prompt.tokens
        if call.endpoint == "compact":
            ids = Ids(call.request.digest)
            answer = compacted_response(prompt, call.options["items"], ids, tokens)
        else:
            answer = {"object": "response.input_tokens", "input_tokens": tokens}
        return JsonReply(200, answer, self.headers(call.request))

    def read(self, call: Call) -> Prompt:
        body = call.body
        items = items_of(body, call)
        call.options["items"] = items
        reasoning = object_at(body, "reasoning")
        include = body["include"] if isinstance(body.get("include"), list) else []
        call.options.update(
            summary=reasoning.get("summary") in ("auto", "concise", "detailed"),
            encrypted="reasoning.encrypted_content" in include,
            include=include,
            obfuscation=object_at(body, "stream_options").get("include_obfuscation", True)
            is not False,
        )
        # what the gateway leaves out (reasoning items, hosted tools' calls) the model never
        # read; each message item is a turn of its own, so the user's last words are the last
        inbound = read_by(
            partial(read_responses, messages_apart=True, held=True), {**body, "input": items}
        )
        fmt = object_at(object_at(body, "text"), "format")
        thinks = ("reasoning" in body or bool(REASONING_MODEL.match(call.model))) and reasoning.get(
            "effort"
        ) != "none"
        prompt = prompt_of(
            inbound,
            call.model,
            thinking=thinks,
            json_mode=fmt.get("type") == "json_object",
            provider=self.name,
            items=items,
        )
        prompt.segments = [dumps(body.get("tools") or []).decode() + prompt.system]
        prompt.segments += [dumps(i).decode() for i in items]
        return prompt

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> dict[str, Any]:
        named: dict[str, list[str]] = {}

        def name(prefix: str) -> None:
            named.setdefault(prefix, []).append(prefix + ids.token(48, "hex"))

        content: list[ContentBlock] = []
        if reply.thinking:
            name("rs_")
            summary = reply.thinking if call.options["summary"] else ""
            content.append(ThinkingBlock(thinking=summary, signature=encrypt(reply.thinking)))
        content += [kept(item) for item in responses_items(reply, call.options["include"], ids)]
        if reply.text:
            name("msg_")
            content.append(TextBlock(text=reply.text, citations=citations(reply) or None))
        for out in reply.calls:
            name("fc_")
            tool_id = call.call_id(ids, "call_", 24)
            content.append(ToolUseBlock(id=tool_id, name=out.name, input=out.args))
        threshold = responses_threshold(call.body)
        if threshold is not None and read_tokens(prompt) >= threshold:
            content.insert(0, kept(responses_item(prompt, ids)))
        response_id = "resp_" + ids.token(48, "hex")
        call.options["named"] = named
        canonical = call.options["response"] = response_of(reply, content, call.model)
        asked = {
            "encrypted_reasoning": call.options["encrypted"],
            "reasoning": call.body.get("reasoning"),
        }
        inbound = Inbound(call.model, [], options=asked)
        output = output_items(content, inbound, response_id, _namer(named))
        if canonical.stop_reason.explanation is not None:  # as its stream ends it too
            refused = refusal_item(canonical.stop_reason.explanation, "msg_" + ids.token(48, "hex"))
            output.append(refused)
        echo = call.options["echo"] = echo_of(call.body)
        stop, usage = canonical.stop_reason, canonical.usage
        response = response_object(inbound, call.model, response_id, output, stop, usage, echo)
        call.options["rendered"], call.options["inbound"] = response, inbound
        self._keep(call, response["id"], output)
        return response

    def _keep(self, call: Call, response_id: str, output: list[dict[str, Any]]) -> None:
        connection = call.request.connection
        if connection is not None:  # WebSocket mode: the connection keeps its last response
            connection.clear()
            connection[response_id] = call.options["items"] + output
        if call.body.get("store") is not False:
            with call.env.lock:
                call.env.responses[response_id] = call.options["items"] + output
                while len(call.env.responses) > MAX_STORED:
                    call.env.responses.pop(next(iter(call.env.responses)))

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        named, inbound, echo = call.options["named"], call.options["inbound"], call.options["echo"]
        writer = ResponseStream(inbound, call.model, rendered["id"], None, _namer(named), echo)
        writer.split = split_text
        written = b""
        content = call.options["response"].content
        for index, block in enumerate(content):
            if isinstance(block, OpaqueBlock):
                written += writer.kept(block)
                continue
            for item in _block_events(index, block):
                written += writer.feed(item)
        response = call.options["response"]
        written += writer.feed(MessageComplete([], response.stop_reason, response.usage))
        frames: list[Frame] = []
        for event in written.split(b"\n\n")[:-1]:
            head, _, payload = event.partition(b"data: ")
            if call.options["obfuscation"] and head.endswith(b".delta\n"):
                data = json.loads(payload)
                data["obfuscation"] = ids.token(3 + len(frames) % 11)
                payload = dumps(data)
            frames.append(Frame(head + b"data: ", payload, b"\n\n"))
        call.options["sequence"] = len(frames)
        return frames

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        message, kind, code = STREAM_ERRORS.get(kind, (FAILED, "server_error", None))
        error = {"code": code or kind, "message": message}
        rendered, number = call.options["rendered"], call.options["sequence"]
        failed = {**rendered, "status": "failed", "output": [], "usage": None, "error": error}
        event = {"type": "response.failed", "sequence_number": number, "response": failed}
        return [sse(event, "response.failed")]


def _namer(named: dict[str, list[str]]) -> Callable[[str], str]:
    """Gives out the ids drawn for each kind of item, in order."""
    left = {prefix: iter(given) for prefix, given in named.items()}
    return lambda prefix: next(left[prefix])


def kept(item: dict[str, Any]) -> OpaqueBlock:
    """An item only the Responses API makes (a hosted tool's call, a compaction item)."""
    return opaque(item["type"], item, RESPONSES)


def _block_events(index: int, block: ContentBlock) -> list[StreamEvent]:
    """A block's events; a reasoning item's encrypted content known when it is added."""
    if not isinstance(block, ThinkingBlock):
        return block_events(index, block)
    pieces = [ThinkingDelta(index, piece) for piece in split_text(block.thinking)]
    return [ThinkingDelta(index, signature=block.signature), *pieces]
