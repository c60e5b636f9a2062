"""Ollama: ``POST /api/chat``, ``POST /api/show``, ``GET /api/tags``, ``GET /api/version``,
``GET /`` (no auth). The models are the ones ``/api/tags`` lists (a local server serves what
it has pulled), or any name with ``Emulator(models="any")``.

Models of families that cannot use tools or think (``gemma*``, as recorded) refuse ``tools``
and ``think`` with Ollama's own 400s; a chat with no messages is a model load (``done_reason:
"load"``); ``stream`` defaults to true. Streams are NDJSON, one object per line and per chunk:
``thinking`` deltas first when ``think`` is on, ``content`` deltas, tool calls whole
(arguments as objects, with an id and an index) in one line, then the ``done: true`` line with
``done_reason`` and the timings. An error inside a stream is an ``{"error": "..."}`` line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.model import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn
from metis.testing.emulator.rules import Refused, table
from metis.testing.emulator.wire import (
    Frame,
    HttpRequest,
    Ids,
    JsonReply,
    StreamReply,
    dumps,
    ndjson,
    object_at,
    rfc3339_nanos,
    split_text,
)

VERSION = "0.12.6"
NO_TOOLS = ("gemma", "llava", "phi3")
NO_THINKING = ("gemma", "llama", "llava", "phi3", "mistral")
MODELS = [
    ("llama3.2:latest", "llama", "3.2B", "Q4_K_M", 2019393189),
    ("qwen3:latest", "qwen3", "8.2B", "Q4_K_M", 5225388164),
    ("gpt-oss:20b", "gptoss", "20.9B", "MXFP4", 13780173734),
    ("gemma3:1b", "gemma3", "999.89M", "Q4_K_M", 815319791),
]
JSON = {"content-type": "application/json; charset=utf-8"}
_RUNNER_EOF = "an error was encountered while running the model: unexpected EOF"
_MODIFIED = "2025-08-20T13:40:00.000000000Z"  # when every listed model was pulled
FAULTS: dict[str, tuple[Any, ...]] = {
    "rate_limit": (429, "too many requests, please try again later"),
    "overloaded": (503, "server busy, please try again.  maximum pending requests exceeded"),
    "server_error": (500, "llama runner process has terminated: exit status 2"),
    "auth": (401, "unauthorized"),
    "context_overflow": (400, "the input length exceeds the context length"),
    "out_of_credit": (402, "payment required"),
}


def _family(body: dict[str, Any]) -> str:
    return str(body.get("model", "")).split("/")[-1].lower()


def _check_capabilities(body: dict[str, Any], call: Any) -> None:
    """Models of families that cannot use tools or think refuse them, as Ollama does."""
    model, family = body["model"], _family(body)
    if body.get("tools") and family.startswith(NO_TOOLS):
        raise Refused(f"registry.ollama.ai/library/{model} does not support tools")
    if _thinks(body) and family.startswith(NO_THINKING):
        raise Refused(f'"{model}" does not support thinking')


def _thinks(body: dict[str, Any]) -> bool:
    return body.get("think") is True or body.get("think") in ("low", "medium", "high")


RULES = table("ollama", {"capabilities": _check_capabilities})


class Ollama(Format):
    name = "ollama"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", "/api/chat", "chat"),
        ("GET", "/api/tags", "tags"),
        ("GET", "/api/version", "version"),
        ("POST", "/api/show", "show"),
        ("GET", "/", "root"),
        ("HEAD", "/", "root"),
    )
    rules = RULES
    window = None
    too_long = FAULTS["context_overflow"][1]
    no_model = (404, 'model "{model}" not found, try pulling it first')

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        return None  # a local Ollama has no auth

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        return JsonReply(refused.status, {"error": refused.message}, dict(JSON))

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        status, message = FAULTS[kind]
        reply = JsonReply(status, {"error": message}, dict(JSON))
        if kind == "rate_limit":
            reply.headers["retry-after"] = f"{retry_after:g}"
        return reply

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        busy = kind in ("rate_limit", "overloaded")
        return [ndjson({"error": FAULTS[kind][1] if busy else _RUNNER_EOF})]

    def headers(self, request: HttpRequest) -> dict[str, str]:
        return dict(JSON)

    def stream_headers(self, call: Call) -> dict[str, str]:
        return {"content-type": "application/x-ndjson"}

    def parse(self, call: Call) -> None:
        if call.endpoint == "chat":
            super().parse(call)
            call.stream = call.body.get("stream", True) is not False

    def serves(self, env: Any, model: str) -> bool:
        """What ``/api/tags`` lists (a name without a tag is ``:latest``), else as told."""
        listed = _tagged(model) in {m[0] for m in MODELS}
        return env.served.policy == "any" or model in env.served.names or listed

    def serve(self, call: Call) -> Any:
        if call.endpoint == "root":
            return JsonReply(
                200, raw=b"Ollama is running", headers={"content-type": "text/plain; charset=utf-8"}
            )
        if call.endpoint == "version":
            return JsonReply(200, {"version": VERSION}, dict(JSON))
        if call.endpoint == "tags":
            return JsonReply(200, {"models": [_tag(*m) for m in MODELS]}, dict(JSON))
        if call.endpoint == "show":
            return _show(call.body)
        if not self.serves(call.env, call.model):
            raise self.unknown_model(call.model)
        if any(m["role"] != "system" for m in call.body.get("messages") or []):
            return None
        loaded = _said(call, {"content": ""}, done_reason="load", done=True)
        if call.stream:
            return StreamReply([ndjson(loaded)], self.stream_headers(call), lambda kind: [])
        return JsonReply(200, loaded, dict(JSON))

    def read(self, call: Call) -> Prompt:
        body = call.body
        think = _thinks(body)
        call.options["think"] = think
        functions = [t["function"] for t in body.get("tools") or []]
        tools = [
            ToolSpec(f["name"], str(f.get("description") or ""), object_at(f, "parameters"))
            for f in functions
        ]
        turns, system = _turns(body["messages"])
        fmt = body.get("format")
        limit = object_at(body, "options").get("num_predict")
        return Prompt(
            model=call.model,
            turns=turns,
            system=system,
            tools=tools,
            thinking=think,
            max_tokens=limit if isinstance(limit, int) and limit > 0 else None,
            output_schema=fmt if isinstance(fmt, dict) else None,
            json_mode=fmt == "json",
            segments=[dumps(body.get("tools") or [], (", ", ": ")).decode()]
            + [dumps(m, (", ", ": ")).decode() for m in body["messages"]],
            provider=self.name,
            items=body["messages"],
        )

    def cached(self, call: Call, prompt: Prompt, reply: Reply) -> None:
        """A local server reports no cache reads."""

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> Any:
        calls = [
            {
                "id": call.call_id(ids, "call_", 8, "lower"),
                "function": {"index": i, "name": c.name, "arguments": c.args},
            }
            for i, c in enumerate(reply.calls)
        ]
        message: dict[str, Any] = {"content": reply.text}
        if call.options["think"] and reply.thinking:
            message["thinking"] = reply.thinking
        if calls:
            message["tool_calls"] = calls
        return _said(call, message, done=True, **_timings(reply))

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        thought = split_text(reply.thinking) if call.options["think"] else []
        said = [{"content": "", "thinking": p} for p in thought]
        said += [{"content": p} for p in split_text(reply.text)]
        if calls := rendered["message"].get("tool_calls"):
            said.append({"content": "", "tool_calls": calls})
        lines = [ndjson(_said(call, message, done=False)) for message in said]
        return [*lines, ndjson(_said(call, {"content": ""}, done=True, **_timings(reply)))]


def _said(call: Call, message: dict[str, Any], **more: Any) -> dict[str, Any]:
    """One answer (or streamed line) of the model: ``message`` and ``more`` after it."""
    shown = {"role": "assistant", **message}
    return {"model": call.model, "created_at": rfc3339_nanos(), "message": shown, **more}


def _turns(messages: list[dict[str, Any]]) -> tuple[list[Turn], str]:
    turns: list[Turn] = []
    system: list[str] = []
    for message in messages:
        role, content = message["role"], message.get("content", "") or ""
        if role == "system":
            system.append(content)
        elif role == "tool":
            name = message.get("tool_name") or message.get("name")
            result = ResultIn(str(message.get("tool_call_id") or ""), content, name)
            if turns and turns[-1].role == "user" and turns[-1].results:
                turns[-1].results.append(result)
            else:
                turns.append(Turn(role="user", results=[result]))
        else:
            turn = Turn(role=role, text=content)
            for j, tool_call in enumerate(message.get("tool_calls") or []):
                function, call_id = tool_call["function"], str(tool_call.get("id") or j)
                arguments = function.get("arguments", {})
                turn.calls.append(CallIn(call_id, str(function.get("name")), arguments))
            turns.append(turn)
    return turns, "\n".join(system)


def _show(body: dict[str, Any]) -> JsonReply:
    model = body.get("model", body.get("name"))
    if not isinstance(model, str) or not model:
        raise Refused("model is required")
    name = _tagged(model)
    _, family, size, quant, _ = {m[0]: m for m in MODELS}.get(
        name, (name, name.split(":")[0], "7B", "Q4_K_M", 0)
    )
    base = name.split("/")[-1].lower()
    capabilities = [
        "completion",
        *(["tools"] if not base.startswith(NO_TOOLS) else []),
        *(["thinking"] if not base.startswith(NO_THINKING) else []),
    ]
    shown = {
        "license": "",
        "modelfile": f"FROM {name}\n",
        "parameters": "temperature 0.6\ntop_p 0.95",
        "template": "{{ .Prompt }}",
        "details": _details(family, size, quant),
        "model_info": {
            "general.architecture": family,
            "general.parameter_count": 8_000_000_000,
            f"{family}.context_length": 40960,
        },
        "capabilities": capabilities,
        "modified_at": _MODIFIED,
    }
    return JsonReply(200, shown, dict(JSON))


def _details(family: str, size: str, quant: str) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family],
        "parameter_size": size,
        "quantization_level": quant,
    }


def _timings(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "done_reason": "length" if reply.stop == "max_tokens" else "stop",
        "total_duration": 1_000_000 + 5_000_000 * usage.output_tokens,
        "load_duration": 1_000_000,
        "prompt_eval_count": usage.input_tokens,
        "prompt_eval_duration": 100_000 * usage.input_tokens,
        "eval_count": usage.output_tokens,
        "eval_duration": 5_000_000 * usage.output_tokens,
    }


def _tag(name: str, family: str, size: str, quant: str, nbytes: int) -> dict[str, Any]:
    digest = Ids(name.encode()).token(64, "hex")
    tag = {"name": name, "model": name, "modified_at": _MODIFIED, "size": nbytes, "digest": digest}
    return {**tag, "details": _details(family, size, quant)}


def _tagged(model: str) -> str:
    """A model's name as ``/api/tags`` lists it (no tag is ``:latest``)."""
    return model if ":" in model else model + ":latest"
