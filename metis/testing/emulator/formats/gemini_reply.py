"""How Gemini answers: a reply's parts (thought parts, text, function calls, the thought
signature on the first call or the first part after thinking), the chunks it streams them in,
and ``usageMetadata``."""

from __future__ import annotations

from typing import Any

from metis.testing.emulator.formats.base import Call
from metis.testing.emulator.formats.gemini_rules import SIGNATURE_KIND
from metis.testing.emulator.formats.server_gemini import SERVER_PARTS, code_parts
from metis.testing.emulator.model import Reply
from metis.testing.emulator.wire import seal, split_text


def reply_parts(call: Call, reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.thinking and call.options["include_thoughts"]:
        parts.append({"text": reply.thinking, "thought": True})
    parts += code_parts(reply)
    if reply.text:
        parts.append({"text": reply.text})
    parts += [{"functionCall": {"name": out.name, "args": out.args}} for out in reply.calls]
    first_call = next((p for p in parts if "functionCall" in p), None)
    first_shown = next((p for p in parts if not p.get("thought")), None)
    signed = (
        first_call
        if call.model.startswith("gemini-3") and first_call
        else first_shown
        if reply.thinking and call.options["signed"]
        else None
    )
    if signed is not None:
        signed["thoughtSignature"] = seal(
            SIGNATURE_KIND, reply.thinking + call.request.digest.hex()
        )
    return parts


def stream_chunks(
    model: str, response_id: str, reply: Reply, parts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    pieces: list[list[dict[str, Any]]] = []
    for part in parts:
        if any(kind in part for kind in SERVER_PARTS):  # whole, in a chunk of its own
            pieces.append([part])
            continue
        if "functionCall" in part:
            if pieces and "functionCall" in pieces[-1][0]:
                pieces[-1].append(part)
            else:
                pieces.append([part])
            continue
        extra = {k: v for k, v in part.items() if k != "text"}
        for n, text in enumerate(split_text(part["text"])):
            pieces.append(
                [
                    {"text": text, "thought": True}
                    if part.get("thought")
                    else {"text": text, **(extra if n == 0 else {})}
                ]
            )
    if not pieces or "text" not in pieces[-1][0]:
        pieces.append([{"text": ""}])
    chunks, seen = [], 0
    visible = reply.usage.output_tokens - reply.usage.thinking_tokens
    for n, piece in enumerate(pieces):
        last = n == len(pieces) - 1
        seen += sum(
            len(p.get("text", "")) // 4 + (5 if "functionCall" in p else 0)
            for p in piece
            if not p.get("thought")
        )
        candidate: dict[str, Any] = {"content": {"parts": piece, "role": "model"}}
        if last:
            candidate["finishReason"] = finish_reason(reply)
        candidate["index"] = 0
        usage = usage_metadata(reply, visible if last else min(seen, visible))
        chunks.append(answer(model, response_id, candidate, usage))
    return chunks


def answer(model: str, response_id: str, candidate: Any, usage: Any) -> dict[str, Any]:
    """A reply's body, or one streamed chunk of it: one candidate and the usage so far."""
    return dict(
        candidates=[candidate], usageMetadata=usage, modelVersion=model, responseId=response_id
    )


def finish_reason(reply: Reply) -> str:
    return "MAX_TOKENS" if reply.stop == "max_tokens" else "STOP"


def usage_metadata(reply: Reply, candidates: int) -> dict[str, Any]:
    usage = reply.usage
    out: dict[str, Any] = {"promptTokenCount": usage.input_tokens}
    if candidates:
        out["candidatesTokenCount"] = candidates
    out["totalTokenCount"] = usage.input_tokens + candidates + usage.thinking_tokens
    if usage.cache_read:
        out["cachedContentTokenCount"] = usage.cache_read
    out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.input_tokens}]
    if usage.cache_read:
        out["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.cache_read}]
    if usage.thinking_tokens:
        out["thoughtsTokenCount"] = usage.thinking_tokens
    return out
