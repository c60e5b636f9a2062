"""A scripted OpenAI Responses server for tests: it keeps the replies it stores, rebuilds the
whole conversation of each request (``previous_response_id``'s chain, then ``input``), checks
it by the rules the real API enforces with a 400, and answers from a script, in the Responses
stream format or as one JSON body.

The rules: ``previous_response_id`` must name a reply it stored (``store`` not false); every
``function_call_output`` answers an earlier ``function_call`` and every ``function_call`` is
answered; a ``reasoning`` item carries the id and the encrypted content the server issued for
it and is followed by a ``message`` or ``function_call``; user content is ``input_*`` parts,
assistant content ``output_text``/``refusal`` parts.

Replies are ``tests/scripted.py``'s (``{"text"}``, ``{"tools"}``, ``{"thinking"}``), so one script
can be shared with the Anthropic and OpenAI Chat flavours there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

Reply = dict[str, Any]
Item = dict[str, Any]


@dataclass
class ScriptedResponses:
    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    contexts: list[list[Item]] = field(default_factory=list)
    """The whole conversation each accepted request stood for, as the server rebuilt it."""
    stored: dict[str, list[Item]] = field(default_factory=dict)
    issued_ids: list[str] = field(default_factory=list)
    failures: list[httpx.Response] = field(default_factory=list)
    """Answers to give, in order, before the script's (a 500 to test retries, say)."""
    _reasoning: dict[str, str] = field(default_factory=dict)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if self.failures:
            return self.failures.pop(0)
        context: list[Item] = []
        previous = body.get("previous_response_id")
        if previous is not None:
            if previous not in self.stored:
                return error(
                    400,
                    f"Previous response with id '{previous}' not found.",
                    "previous_response_not_found",
                )
            context = list(self.stored[previous])
        context += body["input"]
        problems = self.problems(context)
        if problems:
            return error(400, "; ".join(problems), None)
        if not self.script:
            return error(400, "the script has no more replies", None)
        n = len(self.requests)
        response_id = f"resp_{n}"
        output = self._output(self.script.pop(0), n)
        self.contexts.append(context)
        if body.get("store", True):
            self.stored[response_id] = context + output
        response = {
            "id": response_id,
            "object": "response",
            "model": f"{body['model']}-2025",
            "status": "completed",
            "output": output,
            "usage": {
                "input_tokens": 60,
                "input_tokens_details": {"cached_tokens": 10},
                "output_tokens": 12,
                "output_tokens_details": {"reasoning_tokens": 2},
                "total_tokens": 72,
            },
        }
        if body.get("stream"):
            chunks = stream(response)
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content="".join(chunks).encode()
            )
        return httpx.Response(200, json=response)

    def problems(self, context: list[Item]) -> list[str]:
        out: list[str] = []
        calls: list[str] = []
        answered: set[str] = set()
        for i, item in enumerate(context):
            kind = item.get("type", "message")
            where = f"input[{i}]"
            if kind == "function_call":
                calls.append(item["call_id"])
                if not isinstance(item.get("arguments"), str):
                    out.append(f"{where}: arguments must be a string")
            elif kind == "function_call_output":
                if item["call_id"] not in calls:
                    out.append(f"{where}: No tool call found for output {item['call_id']}")
                answered.add(item["call_id"])
            elif kind == "reasoning":
                issued = self._reasoning.get(item.get("id", ""))
                if issued is None or issued != item.get("encrypted_content"):
                    out.append(f"{where}: the encrypted content could not be verified")
                following = context[i + 1].get("type", "message") if i + 1 < len(context) else ""
                if following not in ("message", "function_call"):
                    out.append(f"{where}: reasoning was provided without its following item")
            elif kind == "message":
                allowed = ("output_text", "refusal") if item["role"] == "assistant" else None
                for part in item["content"] if isinstance(item["content"], list) else []:
                    ok = part["type"] in allowed if allowed else part["type"].startswith("input_")
                    if not ok:
                        out.append(f"{where}: {item['role']} content cannot be {part['type']}")
            else:
                out.append(f"{where}: unknown item type {kind!r}")
        out += [f"No tool output found for function call {c}" for c in calls if c not in answered]
        return out

    def _output(self, reply: Reply, n: int) -> list[Item]:
        output: list[Item] = []
        if reply.get("thinking"):
            reasoning, _ = reply["thinking"]
            self._reasoning[f"rs_{n}"] = f"enc_{n}"
            output.append(
                {
                    "id": f"rs_{n}",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": reasoning}],
                    "encrypted_content": f"enc_{n}",
                }
            )
        if reply.get("text"):
            text = {"type": "output_text", "text": reply["text"], "annotations": []}
            output.append(
                {
                    "id": f"msg_{n}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            )
        for i, (name, args) in enumerate(reply.get("tools", [])):
            self.issued_ids.append(f"call_{n}x{i}")
            output.append(
                {
                    "id": f"fc_{n}x{i}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": f"call_{n}x{i}",
                    "name": name,
                    "arguments": json.dumps(args),
                }
            )
        return output


def error(status: int, message: str, code: str | None) -> httpx.Response:
    fields = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    return httpx.Response(status, json={"error": fields})


def stream(response: dict[str, Any]) -> list[str]:
    """``response`` as the Responses API streams it: every item added, filled and done."""
    seq = iter(range(10_000))

    def event(kind: str, **data: Any) -> str:
        payload = json.dumps({"type": kind, "sequence_number": next(seq), **data})
        return f"event: {kind}\ndata: {payload}\n\n"

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    out = [
        event("response.created", response=started),
        event("response.in_progress", response=started),
    ]
    for index, item in enumerate(response["output"]):
        common = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "reasoning":
            out.append(
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "summary": [], "encrypted_content": "stale"},
                )
            )
            for s, part in enumerate(item["summary"]):
                out.append(
                    event(
                        "response.reasoning_summary_part.added",
                        summary_index=s,
                        part={"type": "summary_text", "text": ""},
                        **common,
                    )
                )
                for piece in re.findall(r"\S+\s*", part["text"]):
                    out.append(
                        event(
                            "response.reasoning_summary_text.delta",
                            summary_index=s,
                            delta=piece,
                            **common,
                        )
                    )
        elif item["type"] == "message":
            out.append(
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
            )
            out.append(
                event(
                    "response.content_part.added",
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                    **common,
                )
            )
            for piece in re.findall(r"\S+\s*", item["content"][0]["text"]):
                out.append(
                    event("response.output_text.delta", content_index=0, delta=piece, **common)
                )
        else:
            out.append(
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
            )
            raw = item["arguments"]
            for start in range(0, len(raw), 6):
                out.append(
                    event(
                        "response.function_call_arguments.delta",
                        delta=raw[start : start + 6],
                        **common,
                    )
                )
            out.append(event("response.function_call_arguments.done", arguments=raw, **common))
        out.append(event("response.output_item.done", output_index=index, item=item))
    out.append(event("response.completed", response=response))
    return out


def normalized(context: list[Item]) -> list[Item]:
    """A conversation as the model reads it: without the fields that only describe an item
    (``status``), with arguments parsed, so the server's own copy of a reply compares equal to
    the client's re-encoding of it."""
    out: list[Item] = []
    for item in context:
        item = {k: v for k, v in item.items() if k != "status"}
        if isinstance(item.get("arguments"), str):
            item["arguments"] = json.loads(item["arguments"] or "{}")
        item.setdefault("type", "message")
        out.append(item)
    return out
