"""OpenAI Responses API: ``POST /v1/responses`` and ``/v1/responses/input_tokens``.

Auth as Chat (Bearer); the 400 rules are :mod:`.responses_rules`. Responses are stored unless
``store: false``, for ``previous_response_id``. Streams are ``event:`` + ``data:`` SSE with
``sequence_number``: ``response.created``, ``response.in_progress``, per output item
``output_item.added`` ... ``output_item.done`` (reasoning summary parts and deltas,
``output_text`` deltas, ``function_call_arguments`` deltas), then ``response.completed``
(``response.incomplete`` when max_output_tokens cut it). Reasoning appears when the request
has ``reasoning`` or a reasoning model (its summary when ``reasoning.summary`` is set,
``encrypted_content`` when ``include`` asks for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.openai import REASONING_MODEL, OpenAI
from metis.testing.emulator.formats.responses_rules import (
    INPUT_TOKENS_FIELDS,
    RULES,
    encrypt,
    items_of,
)
from metis.testing.emulator.formats.server_openai import (
    annotation_events,
    responses_items,
    responses_server_events,
    url_citations,
)
from metis.testing.emulator.model import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn
from metis.testing.emulator.rules import Check, Rule, check, one_of
from metis.testing.emulator.wire import (
    Frame,
    Ids,
    JsonReply,
    count_tokens,
    dumps,
    now_unix,
    object_at,
    split_json,
    split_text,
    sse,
    text_of,
)

MAX_STORED = 1000
COUNT_RULES: list[Rule | Check] = [
    Rule(
        "~",
        one_of(*INPUT_TOKENS_FIELDS),
        "Unknown parameter: '{value}'.",
        "{value}",
        "unknown_parameter",
    ),
    *RULES[1:],
]
FAILED = {
    "rate_limit": ("rate_limit_exceeded", "Rate limit reached. Please try again later."),
    "overloaded": ("server_error", "The server is overloaded or not ready yet."),
}


class Responses(OpenAI):
    name = "openai_responses"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", "/v1/responses", "responses"),
        ("POST", "/v1/responses/input_tokens", "input_tokens"),
    )
    rules = RULES
    window = 400_000
    overflow_param = "input"
    overflow_message = (
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again."
    )

    def parse(self, call: Call) -> None:
        if call.endpoint == "input_tokens":
            check(COUNT_RULES, call.body, call)
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
        if call.endpoint != "input_tokens":
            return None
        tokens = sum(count_tokens(segment) for segment in self.read(call).segments) or 1
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
            obfuscation=(body.get("stream_options") or {}).get("include_obfuscation", True)
            is not False,
        )
        turns, texts = _turns(items)
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
                "input_tokens_details": {"cached_tokens": usage.cache_read},
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
        code, message = FAILED.get(
            kind,
            (
                "server_error",
                "An error occurred while processing your request. You can retry your request, or "
                "contact us through our help center.",
            ),
        )
        error = {"code": code, "message": message}
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


def _turns(items: list[dict[str, Any]]) -> tuple[list[Turn], list[str]]:
    turns: list[Turn] = []
    system: list[str] = []
    names: dict[str, str] = {}
    for item in items:
        kind = item.get("type", "message")
        if kind == "custom_tool_call":  # a freeform call: its input, as arguments
            kind, item = "function_call", {**item, "arguments": item.get("input")}
        elif kind == "custom_tool_call_output":
            kind = "function_call_output"
        last = turns[-1] if turns else None
        if kind == "message" and item["role"] in ("system", "developer"):
            system.append(text_of(item["content"]))
        elif (
            kind == "message" and item["role"] == "assistant" and last and last.role == "assistant"
        ):
            last.text = (last.text + "\n" + text_of(item["content"])).strip()
        elif kind == "message":
            turns.append(Turn(role=item["role"], text=text_of(item["content"])))
        elif kind == "function_call":
            names[item["call_id"]] = item["name"]
            call = CallIn(item["call_id"], item["name"], item["arguments"])
            last.calls.append(call) if last and last.role == "assistant" else turns.append(
                Turn(role="assistant", calls=[call])
            )
        elif kind == "function_call_output":
            result = ResultIn(item["call_id"], text_of(item.get("output")), names[item["call_id"]])
            if last and last.role == "user" and last.results:
                last.results.append(result)
            else:
                turns.append(Turn(role="user", results=[result]))
    return turns, system


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


def response_events(response: dict[str, Any], ids: Ids, obfuscate: bool) -> list[Frame]:
    """A rendered response as the Responses API streams it."""
    frames: list[Frame] = []

    def emit(kind: str, data: dict[str, Any], delta: bool = False) -> None:
        event = {"type": kind, "sequence_number": len(frames), **data}
        if delta and obfuscate:
            event["obfuscation"] = ids.token(3 + len(frames) % 11)
        frames.append(sse(event, kind))

    pending = {
        **response,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "incomplete_details": None,
    }
    emit("response.created", {"response": pending})
    emit("response.in_progress", {"response": pending})
    for index, item in enumerate(response["output"]):
        _item_events(emit, index, item)
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    emit(final, {"response": response})
    return frames


def _item_events(emit: Any, index: int, item: dict[str, Any]) -> None:
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "reasoning":
        emit("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}})
        for s_index, part in enumerate(item["summary"]):
            at = {**where, "summary_index": s_index}
            emit(
                "response.reasoning_summary_part.added",
                {**at, "part": {"type": "summary_text", "text": ""}},
            )
            for piece in split_text(part["text"]):
                emit("response.reasoning_summary_text.delta", {**at, "delta": piece}, True)
            emit("response.reasoning_summary_text.done", {**at, "text": part["text"]})
            emit("response.reasoning_summary_part.done", {**at, "part": part})
    elif item["type"] == "message":
        emit(
            "response.output_item.added",
            {"output_index": index, "item": {**item, "status": "in_progress", "content": []}},
        )
        part, at = item["content"][0], {**where, "content_index": 0}
        emit("response.content_part.added", {**at, "part": {**part, "text": "", "annotations": []}})
        for piece in split_text(part["text"]):
            emit("response.output_text.delta", {**at, "delta": piece, "logprobs": []}, True)
        annotation_events(emit, at, part)
        emit("response.output_text.done", {**at, "text": part["text"], "logprobs": []})
        emit("response.content_part.done", {**at, "part": part})
    elif item["type"] in ("web_search_call", "code_interpreter_call"):
        responses_server_events(emit, index, item)
    else:
        emit(
            "response.output_item.added",
            {"output_index": index, "item": {**item, "status": "in_progress", "arguments": ""}},
        )
        for piece in split_json(item["arguments"]):
            emit("response.function_call_arguments.delta", {**where, "delta": piece}, True)
        emit("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
    emit("response.output_item.done", {"output_index": index, "item": item})
