"""Compaction as the two APIs that have it do it (Anthropic's ``compact_20260112`` edit, the
Responses API's ``context_management`` compaction and ``POST /v1/responses/compact``), and the
two checks of its refusals that need the call (the beta, the seal); the forms they refuse are
rows of the tables. docs/emulator.md "Compaction" says how each behaves.
"""

from __future__ import annotations

import json
from typing import Any

from metis.testing.emulator.model import Prompt
from metis.testing.emulator.rules import Refused, names
from metis.testing.emulator.wire import (
    Ids,
    count_tokens,
    encrypted_content,
    is_int,
    now_unix,
    opens_encrypted_content,
)

ANTHROPIC_BETA = "compact-2026-01-12"
SUMMARY_CHARS = 400
SEAL_KIND = "openai-compaction"


def seal(summary: str) -> str:
    """A summary as an ``encrypted_content`` only this emulator opens."""
    return encrypted_content(SEAL_KIND, summary)


def read_tokens(prompt: Prompt) -> int:
    """The input the model reads: from the latest compaction block (a message holding one, or a
    compaction item) on, as the APIs read a compacted conversation; the tools and system too."""
    return sum(count_tokens(segment) for segment in prompt.read_segments())


def read_breakpoints(prompt: Prompt) -> tuple[list[int] | None, list[int] | None]:
    """The prompt's cache breakpoints and blocks per segment over :meth:`Prompt.read_segments`:
    a breakpoint in what the model does not read marks nothing."""
    start = prompt.compaction_start()
    marks, blocks = prompt.breakpoints, prompt.segment_blocks
    if start is None:
        return marks, blocks
    kept = [b if b == 0 else b - start for b in marks or [] if b == 0 or b > start]
    return kept or None, blocks[:1] + blocks[1 + start :] if blocks else None


def summary(prompt: Prompt) -> str:
    """What a compaction pass keeps of a conversation: its turns' text, shortened."""
    said = " ".join(f"{turn.role}: {turn.text}" for turn in prompt.turns if turn.text)
    return f"Summary of {len(prompt.turns)} earlier turns. {said[:SUMMARY_CHARS]}".strip()


# Anthropic -----------------------------------------------------------------------------------


def anthropic_trigger(body: dict[str, Any]) -> int | None:
    """The input tokens past which the request asks for compaction, if it does."""
    for edit in (body.get("context_management") or {}).get("edits") or []:
        if edit.get("type") == "compact_20260112":
            return int((edit.get("trigger") or {}).get("value") or 150_000)
    return None


PASS_COUNTS = names(
    "input_tokens output_tokens cache_read_input_tokens cache_creation_input_tokens"
)


def anthropic_compacted_usage(
    prompt: Prompt, usage: dict[str, Any], block: dict[str, Any]
) -> dict[str, Any]:
    """A compacted reply's ``usage`` as the Messages API reports it (Anthropic's compaction
    docs, "Understanding usage"): ``iterations`` lists the two passes. The compaction pass read
    the conversation (``usage``'s input and cache counts, as measured) and wrote the summary;
    the message pass read the tools, the system and the summary, not the conversation, and
    wrote the reply. The top-level counts are the message pass's only (the sum of the
    non-compaction passes): the compaction pass is billed on top of them."""
    compaction = {
        "type": "compaction",
        **{k: usage[k] for k in PASS_COUNTS},
        "output_tokens": count_tokens(block["content"]),
    }
    read = count_tokens(prompt.segments[0]) + count_tokens(json.dumps(block))
    message = {
        "type": "message",
        "input_tokens": read,
        "output_tokens": usage["output_tokens"],
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    return {
        **usage,
        **{k: message[k] for k in PASS_COUNTS},
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "iterations": [compaction, message],
    }


def check_anthropic_beta(body: dict[str, Any], call: Any) -> None:
    """A compaction edit sent without its beta (the rows before this check read its form)."""
    edits = (body.get("context_management") or {}).get("edits") or []
    if call is None:
        return
    betas = (call.request.headers.get("anthropic-beta") or "").split(",")
    for i, edit in enumerate(edits):
        if edit["type"] == "compact_20260112" and ANTHROPIC_BETA not in betas:
            raise Refused(
                f"context_management.edits.{i}: the compact_20260112 edit requires the "
                f"'anthropic-beta: {ANTHROPIC_BETA}' header"
            )


def anthropic_block(prompt: Prompt) -> dict[str, Any]:
    return {"type": "compaction", "content": summary(prompt)}


# OpenAI Responses ----------------------------------------------------------------------------


def responses_threshold(body: dict[str, Any]) -> int | None:
    """The input tokens past which the request asks for compaction, if it does."""
    for entry in body.get("context_management") or []:
        if isinstance(entry, dict) and entry.get("type") == "compaction":
            value = entry.get("compact_threshold")
            return value if is_int(value) else 0
    return None


def check_responses_seal(body: dict[str, Any], call: Any) -> None:
    """A compaction item sent back whose content this emulator did not seal."""
    raw = body.get("input")
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, dict) or item.get("type") != "compaction":
            continue
        strict = call is None or call.env.strict_signatures
        if strict and not opens_encrypted_content(SEAL_KIND, item["encrypted_content"]):
            raise Refused(
                f"The encrypted content for item {item.get('id') or f'input[{i}]'} could not be "
                "verified.",
                f"input[{i}]",
                "invalid_encrypted_content",
            )


def responses_item(prompt: Prompt, ids: Ids) -> dict[str, Any]:
    return {
        "id": "cmp_" + ids.token(48, "hex"),
        "type": "compaction",
        "encrypted_content": seal(summary(prompt)),
    }


def compacted_response(
    prompt: Prompt, items: list[dict[str, Any]], ids: Ids, input_tokens: int
) -> dict[str, Any]:
    """``POST /v1/responses/compact``'s answer: the user messages, then one compaction item."""
    users = [i for i in items if i.get("type", "message") == "message" and i.get("role") == "user"]
    output_tokens = max(1, len(summary(prompt)) // 4)
    return {
        "id": "resp_" + ids.token(48, "hex"),
        "object": "response.compaction",
        "created_at": now_unix(),
        "output": [*users, responses_item(prompt, ids)],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }
