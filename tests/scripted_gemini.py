"""A scripted Gemini for tests, the Gemini flavour of tests/scripted.py: it checks each
generateContent body by the rules the real API enforces with a 400, and answers with the next
scripted reply in Gemini's own format (SSE chunks for streamGenerateContent).

Rules (each one a 400 from the real API): roles are ``user`` and ``model``; every content has
parts, every part one kind of data and no empty text; function parameters hold only Gemini's
OpenAPI-subset keywords ("Unknown name ..."); a model turn's function calls are answered by
the very next user turn, with as many functionResponse parts, naming the same functions; and
on Gemini 3 models the first functionCall of each step of the current turn carries its
thought signature, one this provider issued (or Google's documented bypass value).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from metis.wire.rules import gemini_problems as wire_gemini_problems

Reply = dict[str, Any]
BYPASS = "skip_thought_signature_validator"
_SCHEMA_KEYS = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
}  # fmt: skip


def gemini_problems(body: dict[str, Any], model: str, issued: set[str]) -> list[str]:
    """The structural rules metis checks before sending, plus what only the server can know:
    which schema keywords it accepts and which thought signatures it issued."""
    problems = wire_gemini_problems(body)
    for i, tool in enumerate(body.get("tools") or []):
        for j, declaration in enumerate(tool.get("functionDeclarations") or []):
            _schema_problems(declaration.get("parameters"), f"tools[{i}].fd[{j}]", problems)
    if "gemini-3" in model and isinstance(body.get("contents"), list):
        problems.extend(_signature_problems(body["contents"], issued))
    return problems


def _schema_problems(schema: Any, where: str, problems: list[str]) -> None:
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key not in _SCHEMA_KEYS:
            problems.append(f"{where}: Unknown name {key!r}: Cannot find field")
        elif key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                _schema_problems(sub, f"{where}.properties.{name}", problems)
        elif key == "items":
            _schema_problems(value, f"{where}.items", problems)
        elif key == "anyOf" and isinstance(value, list):
            for n, sub in enumerate(value):
                _schema_problems(sub, f"{where}.anyOf[{n}]", problems)


def _signature_problems(contents: list[dict[str, Any]], issued: set[str]) -> list[str]:
    """Gemini 3: the current turn starts after the last user content holding text."""
    start = 0
    for i, content in enumerate(contents):
        if content.get("role") == "user" and any("text" in p for p in content.get("parts", [])):
            start = i + 1
    problems = []
    for i, content in enumerate(contents[start:], start):
        calls = [p for p in content.get("parts", []) if "functionCall" in p]
        if content.get("role") == "model" and calls:
            signature = calls[0].get("thoughtSignature")
            if signature is None:
                problems.append(f"contents[{i}]: function call is missing a thought_signature")
            elif signature != BYPASS and signature not in issued:
                problems.append(f"contents[{i}]: invalid thought signature {signature[:12]!r}")
    return problems


@dataclass
class ScriptedGemini:
    """Answers from a script (shareable with tests/scripted.py's providers)."""

    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    issued_signatures: set[str] = field(default_factory=set)

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        model = re.search(r"/models/([^:]+):", str(request.url))
        problems = gemini_problems(body, model.group(1) if model else "", self.issued_signatures)
        if problems:
            error = {"code": 400, "message": "; ".join(problems), "status": "INVALID_ARGUMENT"}
            return httpx.Response(400, json={"error": error})
        if not self.script:
            return httpx.Response(400, json={"error": {"message": "script is empty"}})
        n = len(self.requests)
        chunks = self._chunks(self.script.pop(0), n)
        if ":streamGenerateContent" in str(request.url):
            sse = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=sse)
        whole = chunks[-1]
        parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
        whole["candidates"][0]["content"]["parts"] = parts
        return httpx.Response(200, json=whole)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))

    def _chunks(self, reply: Reply, n: int) -> list[dict[str, Any]]:
        parts: list[list[dict[str, Any]]] = []
        for piece in re.findall(r"\S+\s*", reply.get("text") or ""):
            parts.append([{"text": piece}])
        calls = []
        for i, (name, args) in enumerate(reply.get("tools", [])):
            call: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
            if i == 0:  # Gemini 3 signs the first call of a step
                call["thoughtSignature"] = signature = f"sig-{n}-{name}"
                self.issued_signatures.add(signature)
            calls.append(call)
        if calls:
            parts.append(calls)
        parts = parts or [[{"text": ""}]]
        usage = {"promptTokenCount": 50, "candidatesTokenCount": 10, "totalTokenCount": 60}
        chunks = []
        for i, chunk_parts in enumerate(parts):
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": chunk_parts}}
            if i == len(parts) - 1:
                candidate["finishReason"] = "STOP"
            chunks.append(
                {
                    "candidates": [candidate],
                    "usageMetadata": usage,
                    "modelVersion": "gemini-scripted",
                    "responseId": f"resp{n}",
                }
            )
        return chunks
