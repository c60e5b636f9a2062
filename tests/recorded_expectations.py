"""What each recorded reply says, read straight from the recording, independently of the
codecs: the blocks, usage, stop reason and dropped items a replay must give, and the error a
recorded failure must raise. One reader per API; ``tests/conformance/test_real_traffic.py`` replays.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from metis.errors import AdapterError, CapabilityError, ErrorClass
from metis.model import (
    MessageComplete,
    OpaqueBlock,
    RedactedThinkingBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind

from .recordings import Exchange

Blocks = list[tuple[Any, ...]]
CANONICAL_ANTHROPIC_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}
CANONICAL_RESPONSES_ITEMS = {"message", "function_call", "reasoning"}
SERVER_RESPONSES_ITEMS = {"web_search_call", "code_interpreter_call"}
GEMINI_SERVER_PARTS = {"executableCode", "codeExecutionResult", "toolCall", "toolResponse"}
_BEDROCK_STOP = {
    "end_turn": StopKind.END_TURN,
    "tool_use": StopKind.TOOL_USE,
    "max_tokens": StopKind.MAX_TOKENS,
}


@dataclass
class Expected:
    """A reply as recorded. ``None`` (and an absent usage key) means the harness for that API
    does not check it."""

    blocks: Blocks
    usage: dict[str, int]
    stop_raw: str | None
    stop_kind: StopKind | None = None
    dropped: int | None = None  # lossy_projection warnings
    dropped_types: list[str] | None = None  # ... and the block type each one names
    message_id: str | None = None


@dataclass
class ExpectedError:
    """A recorded failure, as the adapter must raise it (``None``: not checked)."""

    error_class: ErrorClass = ErrorClass.INVALID_REQUEST
    error_type: type[AdapterError] = AdapterError
    message_contains: str = ""  # in the error's own message
    provider_message: str | None = None  # exactly
    provider_message_contains: str | None = None  # "" means any text at all
    provider_code: str | None = None
    retryable: bool | None = None


def sse_payloads(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[5:])
        for line in body.decode().splitlines()
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
    ]


def usage_of(
    input_tokens: int, output_tokens: int, cached: int = 0, written: int = 0
) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cached_input_tokens": cached,
        "cache_creation_input_tokens": written,
    }


# Anthropic Messages ------------------------------------------------------------------------


def expected_anthropic(exchange: Exchange) -> Expected:
    if exchange.streamed:
        content, usage, stop = _anthropic_stream(exchange.body)
    else:
        reply = json.loads(exchange.body)
        content, stop = reply["content"], reply["stop_reason"]
        usage = {k: v for k, v in reply["usage"].items() if isinstance(v, int)}
    blocks: Blocks = []
    for block in content:
        if block["type"] == "text" and block["text"]:
            blocks.append(("text", block["text"]))
        elif block["type"] == "tool_use":
            blocks.append(("tool", (block["name"], block["input"])))
        elif block["type"] == "thinking":
            blocks.append(("thinking", block.get("signature")))
        elif block["type"] == "redacted_thinking":
            blocks.append(("redacted", block["data"]))
        elif block["type"] == "server_tool_use":
            blocks.append(("server_call", (block["id"], block["name"], block["input"])))
        elif _anthropic_server_result(block):
            blocks.append(("server_result", block["tool_use_id"]))
        elif block["type"] not in CANONICAL_ANTHROPIC_BLOCKS:  # kept whole, opaque
            blocks.append(("opaque", block["type"]))
    return Expected(
        blocks=blocks,
        usage=usage_of(
            usage.get("input_tokens", 0),
            usage.get("output_tokens", 0),
            usage.get("cache_read_input_tokens", 0),
            usage.get("cache_creation_input_tokens", 0),
        ),
        stop_raw=stop,
        dropped=0,  # blocks with no canonical form are kept (opaque), never dropped
    )


def _anthropic_server_result(block: dict[str, Any]) -> bool:
    """A server tool's result (MCP results answer MCP calls, which have no canonical form)."""
    kind = str(block["type"])
    return kind.endswith("_tool_result") and not kind.startswith("mcp_")


def _anthropic_stream(body: bytes) -> tuple[list[dict[str, Any]], dict[str, int], str | None]:
    usage: dict[str, int] = {}
    stop = None
    starts: dict[int, dict[str, Any]] = {}
    texts: dict[int, list[str]] = {}
    for obj in sse_payloads(body):
        if obj["type"] == "message_start":
            usage.update({k: v for k, v in obj["message"]["usage"].items() if isinstance(v, int)})
        elif obj["type"] == "content_block_start":
            starts[obj["index"]] = dict(obj["content_block"])
            texts[obj["index"]] = []
        elif obj["type"] == "content_block_delta":
            delta = obj["delta"]
            piece = delta.get("text") or delta.get("partial_json") or delta.get("thinking")
            if piece:
                texts[obj["index"]].append(piece)
            if delta["type"] == "signature_delta":
                starts[obj["index"]]["signature"] = delta["signature"]
        elif obj["type"] == "message_delta":
            stop = obj["delta"].get("stop_reason")
            usage.update({k: v for k, v in (obj.get("usage") or {}).items() if isinstance(v, int)})
    content = []
    for index in sorted(starts):
        block = starts[index]
        joined = "".join(texts[index])
        if block["type"] == "text":
            block["text"] = block.get("text", "") + joined
        elif block["type"] in ("tool_use", "server_tool_use"):
            block["input"] = json.loads(joined) if joined else block.get("input", {})
        elif block["type"] == "thinking":
            block["thinking"] = joined
        content.append(block)
    return content, usage, stop


def observed_anthropic(final: MessageComplete) -> Blocks:
    blocks: Blocks = []
    for block in final.final_content:
        if isinstance(block, TextBlock):
            blocks.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            blocks.append(("tool", (block.name, block.input)))
        elif isinstance(block, ThinkingBlock):
            blocks.append(("thinking", block.signature))
        elif isinstance(block, RedactedThinkingBlock):
            blocks.append(("redacted", block.data))
        elif isinstance(block, ServerToolCallBlock):
            blocks.append(("server_call", (block.id, block.name, block.input)))
        elif isinstance(block, ServerToolResultBlock):
            blocks.append(("server_result", block.tool_call_id))
        elif isinstance(block, OpaqueBlock):
            blocks.append(("opaque", block.kind))
    return blocks


# OpenAI Chat Completions ---------------------------------------------------------------------


def expected_openai(exchange: Exchange) -> Expected:
    text: list[str] = []
    calls: dict[int, list[Any]] = {}
    stop = None
    usage: dict[str, Any] = {}
    if exchange.streamed:
        for obj in sse_payloads(exchange.body):
            if obj.get("usage"):
                usage = obj["usage"]
            for choice in obj.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                for call in delta.get("tool_calls") or []:
                    entry = calls.setdefault(call["index"], [None, ""])
                    entry[0] = entry[0] or call.get("function", {}).get("name")
                    entry[1] += call.get("function", {}).get("arguments") or ""
                stop = choice.get("finish_reason") or stop
    else:
        reply = json.loads(exchange.body)
        choice = reply["choices"][0]
        if choice["message"].get("content"):
            text.append(choice["message"]["content"])
        for i, call in enumerate(choice["message"].get("tool_calls") or []):
            calls[i] = [call["function"]["name"], call["function"]["arguments"]]
        stop = choice["finish_reason"]
        usage = reply.get("usage") or {}
    blocks: Blocks = [("text", "".join(text))] if text else []
    blocks += [("tool", (name, json.loads(args or "{}"))) for name, args in calls.values()]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Expected(
        blocks=blocks,
        usage=usage_of(
            usage.get("prompt_tokens", 0) - cached, usage.get("completion_tokens", 0), cached
        ),
        stop_raw=stop,
        dropped=0,
    )


# OpenAI Responses ----------------------------------------------------------------------------


def expected_responses(exchange: Exchange) -> Expected:
    if exchange.streamed:
        payloads = sse_payloads(exchange.body)
        final = next(p["response"] for p in payloads if p["type"] == "response.completed")
        done = {
            p["output_index"]: p["item"]
            for p in payloads
            if p["type"] == "response.output_item.done"
        }
        items = [done[i] for i in sorted(done)]
    else:
        final = json.loads(exchange.body)
        items = final["output"]
    blocks: Blocks = []
    for item in items:
        if item["type"] == "message":
            text = "".join(p.get("text") or p.get("refusal") or "" for p in item["content"])
            if text:
                blocks.append(("text", text))
        elif item["type"] == "function_call":
            blocks.append(("tool", (item["name"], json.loads(item["arguments"] or "{}"))))
        elif item["type"] == "reasoning":
            summary = "\n\n".join(p["text"] for p in item.get("summary") or [])
            if summary or item.get("encrypted_content"):
                blocks.append(("thinking", (summary, item.get("encrypted_content"))))
        elif item["type"] in SERVER_RESPONSES_ITEMS:
            blocks.append(("server_call", item["id"]))
            blocks.append(("server_result", item["id"]))
        elif item["type"] not in CANONICAL_RESPONSES_ITEMS:  # kept whole, opaque
            blocks.append(("opaque", item["type"]))
    usage = final["usage"]
    details = usage.get("input_tokens_details") or {}
    cached, written = details.get("cached_tokens", 0), details.get("cache_write_tokens", 0)
    calls = any(item["type"] == "function_call" for item in items)
    assert final["status"] == "completed"  # every recorded reply did complete
    return Expected(
        blocks=blocks,
        usage=usage_of(
            usage["input_tokens"] - cached - written, usage["output_tokens"], cached, written
        ),
        stop_raw="completed",
        # Items with no canonical form are kept (opaque) and never decide the stop.
        stop_kind=StopKind.TOOL_USE if calls else StopKind.END_TURN,
        dropped=0,
        message_id=final["id"],
    )


def observed_responses(final: MessageComplete) -> Blocks:
    blocks: Blocks = []
    for block in final.final_content:
        if isinstance(block, TextBlock):
            blocks.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            blocks.append(("tool", (block.name, block.input)))
        elif isinstance(block, ThinkingBlock):
            blocks.append(("thinking", (block.thinking, block.signature)))
        elif isinstance(block, ServerToolCallBlock):
            blocks.append(("server_call", block.id))
        elif isinstance(block, ServerToolResultBlock):
            blocks.append(("server_result", block.tool_call_id))
        elif isinstance(block, OpaqueBlock):
            blocks.append(("opaque", block.kind))
    return blocks


def error_responses(exchange: Exchange) -> ExpectedError:
    error = json.loads(exchange.body)["error"]
    assert exchange.status == 400
    return ExpectedError(
        provider_message=error["message"], provider_code=error["code"], retryable=False
    )


# Gemini (and Gemini on Vertex AI) ------------------------------------------------------------


def gemini_chunks(exchange: Exchange) -> list[dict[str, Any]]:
    if not exchange.streamed:
        return [json.loads(exchange.body)]
    events = re.split(r"\r\n\r\n|\n\n|\r\r", exchange.body.decode())
    data = [e[5:].strip() for e in events if e.startswith("data:") and e[5:].strip()]
    return [json.loads(d) for d in data]


def gemini_parts(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    candidate = (chunk.get("candidates") or [{}])[0]
    parts: list[dict[str, Any]] = (candidate.get("content") or {}).get("parts") or []
    return parts


def expected_gemini(exchange: Exchange) -> Expected:
    blocks: list[list[Any]] = []  # [kind, content, signature]
    dropped = 0
    usage: dict[str, Any] = {}
    finish = None
    for chunk in gemini_chunks(exchange):
        candidate = (chunk.get("candidates") or [{}])[0]
        for part in gemini_parts(chunk):
            dropped += _add_gemini_part(blocks, part)
        usage = chunk.get("usageMetadata") or usage
        finish = candidate.get("finishReason") or finish
    cached = usage.get("cachedContentTokenCount", 0)
    calls = any(block[0] == "tool" for block in blocks)
    return Expected(
        blocks=[(block[0], block[1], block[2]) for block in blocks],
        usage=usage_of(
            usage.get("promptTokenCount", 0) + usage.get("toolUsePromptTokenCount", 0) - cached,
            usage.get("candidatesTokenCount", 0) + usage.get("thoughtsTokenCount", 0),
            cached,
        ),
        stop_raw=finish,
        stop_kind=StopKind.TOOL_USE if calls else StopKind.END_TURN,
        dropped=dropped,  # groundingMetadata: citations
    )


def _add_gemini_part(blocks: list[list[Any]], part: dict[str, Any]) -> int:
    """Adds one part to ``blocks``, the way the recording reads; 1 when it has no canonical
    form (it is dropped), else 0."""
    signature = part.get("thoughtSignature")
    last = blocks[-1] if blocks else None
    if part.get("thought"):
        if last and last[0] == "thinking":
            last[1] += part["text"]
            last[2] = last[2] or signature
        else:
            blocks.append(["thinking", part["text"], signature])
    elif "text" in part:
        if last and last[0] == "text" and not (signature and last[2]):
            last[1] += part["text"]
            last[2] = last[2] or signature
        elif part["text"] or signature:
            blocks.append(["text", part["text"], signature])
    elif "functionCall" in part:
        call = part["functionCall"]
        blocks.append(["tool", (call["name"], call.get("args", {})), signature, part])
    elif "functionResponse" in part and (call_at := _answered(blocks, part)) is not None:
        blocks[call_at] = ["server", blocks[call_at][3], None]  # a call Gemini ran (MCP)
        blocks.append(["server", part, None])
    elif GEMINI_SERVER_PARTS & set(part):
        blocks.append(["server", part, None])
    else:
        return 1
    return 0


def _answered(blocks: list[list[Any]], part: dict[str, Any]) -> int | None:
    """The index of the call in ``blocks`` that a ``functionResponse`` part answers."""
    name = part["functionResponse"].get("name")
    for at, block in enumerate(blocks):
        if block[0] == "tool" and block[1][0] == name:
            return at
    return None


def observed_gemini(final: MessageComplete) -> Blocks:
    out: Blocks = []
    for block in final.final_content:
        raw = block.provider_raw.data if block.provider_raw else {}
        if isinstance(block, ThinkingBlock):
            out.append(("thinking", block.thinking, block.signature))
        elif isinstance(block, TextBlock):
            out.append(("text", block.text, raw.get("thoughtSignature")))
        elif isinstance(block, ToolUseBlock):
            out.append(("tool", (block.name, block.input), raw.get("thoughtSignature")))
        elif isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
            out.append(("server", raw.get("part"), None))
    return out


def error_gemini(exchange: Exchange) -> ExpectedError:
    return ExpectedError(provider_code="NOT_FOUND", provider_message_contains="is not found")


# Ollama /api/chat ----------------------------------------------------------------------------


def ollama_lines(exchange: Exchange) -> list[dict[str, Any]]:
    if not exchange.streamed:
        return [json.loads(exchange.body)]
    return [json.loads(line) for line in exchange.body.decode().splitlines() if line.strip()]


def expected_ollama(exchange: Exchange) -> Expected:
    thinking, text, calls = [], [], []
    last: dict[str, Any] = {}
    for obj in ollama_lines(exchange):
        message = obj.get("message") or {}
        thinking.append(message.get("thinking") or "")
        text.append(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            calls.append((call["function"]["name"], call["function"]["arguments"]))
        last = obj
    blocks: Blocks = []
    if "".join(thinking):
        blocks.append(("thinking", "".join(thinking)))
    if "".join(text):
        blocks.append(("text", "".join(text)))
    blocks += [("tool", call) for call in calls]
    done_reason = last.get("done_reason")
    kinds = {"stop": StopKind.TOOL_USE if calls else StopKind.END_TURN}
    kinds["length"] = StopKind.MAX_TOKENS
    return Expected(
        blocks=blocks,
        usage=usage_of(last.get("prompt_eval_count", 0), last.get("eval_count", 0)),
        stop_raw=done_reason,
        stop_kind=kinds[done_reason],  # type: ignore[index]
    )


def observed_ollama(final: MessageComplete) -> Blocks:
    out: Blocks = []
    for block in final.final_content:
        if isinstance(block, ThinkingBlock):
            out.append(("thinking", block.thinking))
        elif isinstance(block, TextBlock):
            out.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            out.append(("tool", (block.name, block.input)))
    return out


def error_ollama(exchange: Exchange) -> ExpectedError:
    """The one recorded error: gemma3:1b refuses a request with tools. The adapter declares
    tools (a user's mistaken declaration), so only the server can refuse."""
    return ExpectedError(
        error_class=ErrorClass.CAPABILITY,
        error_type=CapabilityError,
        provider_message=json.loads(exchange.body)["error"],
    )


# Bedrock Converse ----------------------------------------------------------------------------


def expected_bedrock(exchange: Exchange) -> Expected:
    """Text, reasoning, tool calls, stop reason and usage: JSON bodies as stored, event streams
    through botocore's own decoder."""
    text, thinking, tools = "", "", []
    if not exchange.streamed:
        reply = json.loads(exchange.body)
        for block in reply["output"]["message"]["content"]:
            text += block.get("text", "")
            if "reasoningContent" in block:
                thinking += block["reasoningContent"]["reasoningText"]["text"]
            if "toolUse" in block:
                tools.append(("tool", (block["toolUse"]["name"], block["toolUse"]["input"])))
        stop, usage = reply["stopReason"], reply["usage"]
    else:
        from botocore.eventstream import EventStreamBuffer

        buffer = EventStreamBuffer()
        buffer.add_data(exchange.body)
        for message in buffer:
            event = json.loads(message.payload)
            kind = message.headers[":event-type"]
            if kind == "contentBlockDelta":
                text += event["delta"].get("text", "")
                thinking += event["delta"].get("reasoningContent", {}).get("text", "")
            elif kind == "messageStop":
                stop = event["stopReason"]
            elif kind == "metadata":
                usage = event["usage"]
    return Expected(
        blocks=[("text", text), ("thinking", thinking), *tools],
        usage={"input_tokens": usage["inputTokens"], "output_tokens": usage["outputTokens"]},
        stop_raw=stop,
        stop_kind=_BEDROCK_STOP[stop],
    )


def observed_bedrock(final: MessageComplete) -> Blocks:
    content = final.final_content
    text = "".join(b.text for b in content if isinstance(b, TextBlock))
    thinking = "".join(b.thinking for b in content if isinstance(b, ThinkingBlock))
    tools = [("tool", (b.name, b.input)) for b in content if isinstance(b, ToolUseBlock)]
    return [("text", text), ("thinking", thinking), *tools]


def error_bedrock(exchange: Exchange) -> ExpectedError:
    return ExpectedError(message_contains="model identifier is invalid")


def error_recorded(exchange: Exchange) -> ExpectedError:
    """Anthropic and OpenAI Chat: a refused request, with the provider's message."""
    return ExpectedError(provider_message_contains="")
