"""OpenAI Responses API: ``POST /v1/responses``, ``/v1/responses/input_tokens`` and
``/v1/responses/compact`` (compaction: :mod:`.compaction`).

Auth as Chat (Bearer); the 400 rules are ``tables/responses.yaml`` and the checks of
:mod:`.responses_rules`. Responses are stored unless ``store: false``, for
``previous_response_id``. Streams are ``event:`` + ``data:`` SSE with ``sequence_number``:
``response.created``, ``response.in_progress``, per output item ``output_item.added`` ...
``output_item.done`` (reasoning summary parts and deltas, ``output_text`` deltas,
``function_call_arguments`` deltas), then ``response.completed`` (``response.incomplete`` when
max_output_tokens cut it). Reasoning appears when the request has ``reasoning`` or a reasoning
model (its summary when ``reasoning.summary`` is set, ``encrypted_content`` when ``include``
asks for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from metis.gateway.responses_read import read_input
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.canonical_turns import read_by, turns_of
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
from metis.testing.emulator.formats.responses_stream import response_events
from metis.testing.emulator.formats.server_openai import (
    responses_items,
    url_citations,
)
from metis.testing.emulator.model import Prompt, Reply, ToolSpec
from metis.testing.emulator.rules import check
from metis.testing.emulator.wire import (
    Frame,
    Ids,
    JsonReply,
    dumps,
    now_unix,
    object_at,
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
    overflow_param = "input"
    overflow_message = (
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again."
    )

    def parse(self, call: Call) -> None:
        if call.endpoint in ("input_tokens", "compact"):
            check(
                COUNT_RULES if call.endpoint == "input_tokens" else COMPACT_RULES, call.body, call
            )
            call.model = call.body["model"]
        else:
            super().parse(call)

    def unknown_model(self, model: str) -> Any:
        refused = super().unknown_model(model)
        refused.message, refused.param, refused.status = (
            f"The requested model '{model}' does not exist.",
            "model",
            400,
        )
        return refused

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
            return JsonReply(200, answer, self.headers(call.request))
        return JsonReply(
            200,
            {"object": "response.input_tokens", "input_tokens": tokens},
            self.headers(call.request),
        )

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
        messages = read_by(lambda raw: read_input(raw, [], messages_apart=True), items)
        turns, texts = turns_of(messages)
        instructions = body.get("instructions") if isinstance(body.get("instructions"), str) else ""
        system = "\n".join([str(instructions), *texts])
        fmt = object_at(object_at(body, "text"), "format")
        schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
        thinks = ("reasoning" in body or bool(REASONING_MODEL.match(call.model))) and reasoning.get(
            "effort"
        ) != "none"
        return Prompt(
            model=call.model,
            turns=turns,
            system=system,
            tools=[
                ToolSpec(
                    t["name"],
                    str(t.get("description") or ""),
                    t.get("parameters") or {"type": "object", "properties": {}},
                )
                for t in body.get("tools") or []
                if t["type"] == "function"
            ],
            tool_choice=_choice(body.get("tool_choice")),
            parallel=body.get("parallel_tool_calls", True) is not False,
            thinking=thinks,
            max_tokens=body.get("max_output_tokens"),
            output_schema=schema if isinstance(schema, dict) else None,
            json_mode=fmt.get("type") == "json_object",
            segments=[dumps(body.get("tools") or []).decode() + system]
            + [dumps(i).decode() for i in items],
            provider=self.name,
            items=items,
        )

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> dict[str, Any]:
        output = _output(call, reply, ids)
        threshold = responses_threshold(call.body)
        if threshold is not None and read_tokens(prompt) >= threshold:
            output.insert(0, responses_item(prompt, ids))
        body, usage = call.body, reply.usage
        incomplete = reply.stop == "max_tokens"
        reasoning = object_at(body, "reasoning")
        response = {
            "id": "resp_" + ids.token(48, "hex"),
            "object": "response",
            "created_at": now_unix(),
            "status": "incomplete" if incomplete else "completed",
            "background": False,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": call.model,
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "usage": {
                "input_tokens": usage.input_tokens,
                "input_tokens_details": {
                    "cached_tokens": usage.cache_read,
                    **({"cache_write_tokens": usage.cache_write} if usage.cache_write else {}),
                },
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": usage.thinking_tokens},
                "total_tokens": usage.input_tokens + usage.output_tokens,
            },
            "user": None,
            "metadata": body.get("metadata") or {},
        }
        call.options["rendered"] = response
        connection = call.request.connection
        if connection is not None:  # WebSocket mode: the connection keeps its last response
            connection.clear()
            connection[response["id"]] = call.options["items"] + output
        if body.get("store") is not False:
            with call.env.lock:
                call.env.responses[response["id"]] = call.options["items"] + output
                while len(call.env.responses) > MAX_STORED:
                    call.env.responses.pop(next(iter(call.env.responses)))
        return response

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        frames = response_events(rendered, ids, call.options["obfuscation"])
        call.options["sequence"] = len(frames)
        return frames

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        message, kind, code = STREAM_ERRORS.get(kind, (FAILED, "server_error", None))
        error = {"code": code or kind, "message": message}
        failed = {
            **call.options["rendered"],
            "status": "failed",
            "output": [],
            "usage": None,
            "error": error,
        }
        event = {
            "type": "response.failed",
            "sequence_number": call.options["sequence"],
            "response": failed,
        }
        return [sse(event, "response.failed")]


def _choice(raw: Any) -> str:
    if isinstance(raw, dict):
        return (
            f"tool:{raw['name']}" if raw.get("type") == "function" else "auto"
        )  # hosted tools, allowed_tools
    return str(raw or "auto")


def _output(call: Call, reply: Reply, ids: Ids) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if reply.thinking:
        summary = (
            [{"type": "summary_text", "text": reply.thinking}] if call.options["summary"] else []
        )
        reasoning = {"id": "rs_" + ids.token(48, "hex"), "type": "reasoning", "summary": summary}
        output.append(
            {**reasoning, "encrypted_content": encrypt(reply.thinking)}
            if call.options["encrypted"]
            else reasoning
        )
    output += responses_items(reply, call.options["include"], ids)
    if reply.text:
        annotations = url_citations(reply)
        part = {
            "type": "output_text",
            "annotations": annotations,
            "logprobs": [],
            "text": reply.text,
        }
        message = {
            "id": "msg_" + ids.token(48, "hex"),
            "type": "message",
            "status": "completed",
            "content": [part],
        }
        output.append({**message, "role": "assistant"})
    for out in reply.calls:
        item_id = "fc_" + ids.token(48, "hex")
        call_id = call.call_id(ids, "call_", 24)
        output.append(
            {
                "id": item_id,
                "type": "function_call",
                "status": "completed",
                "arguments": out.arguments,
                "call_id": call_id,
                "name": out.name,
            }
        )
    return output
