"""Compaction as the two APIs that have it do it (Anthropic's ``compact_20260112`` edit, the
Responses API's ``context_management`` compaction and ``POST /v1/responses/compact``), and what
they refuse of its forms; docs/emulator.md "Compaction" says how each behaves.
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
ANTHROPIC_EDITS = ("compact_20260112", "clear_tool_uses_20250919", "clear_thinking_20251015")
ANTHROPIC_MIN_TRIGGER = 50_000
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


def check_anthropic(body: dict[str, Any], call: Any) -> None:
    """The context-management edits, the beta they need, and compaction blocks sent back."""
    management = body.get("context_management")
    if management is not None:
        _check_anthropic_edits(management, call)
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "compaction":
                _check_anthropic_block(block, f"messages.{i}.content.{j}")


def _check_anthropic_edits(management: Any, call: Any) -> None:
    edits = management.get("edits", []) if isinstance(management, dict) else None
    if not isinstance(edits, list):  # Claude Code sends an empty list
        raise Refused("context_management.edits: Input should be a valid list")
    for i, edit in enumerate(edits):
        where = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in ANTHROPIC_EDITS:
            raise Refused(
                f"{where}: Input tag {kind!r} found using 'type' does not match any of the "
                f"expected tags: {', '.join(repr(e) for e in ANTHROPIC_EDITS)}"
            )
        if kind != "compact_20260112":
            continue
        extra = set(edit) - {"type", "trigger", "pause_after_compaction", "instructions"}
        if extra:
            raise Refused(f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted")
        _check_trigger(edit.get("trigger"), f"{where}.trigger")
        if not isinstance(edit.get("pause_after_compaction", False), bool):
            raise Refused(f"{where}.pause_after_compaction: Input should be a valid boolean")
        if not isinstance(edit.get("instructions") or "", str):
            raise Refused(f"{where}.instructions: Input should be a valid string")
        betas = (call.request.headers.get("anthropic-beta") or "") if call is not None else None
        if betas is not None and ANTHROPIC_BETA not in betas.split(","):
            raise Refused(
                f"{where}: the compact_20260112 edit requires the "
                f"'anthropic-beta: {ANTHROPIC_BETA}' header"
            )


def _check_trigger(trigger: Any, where: str) -> None:
    if trigger is None:
        return
    if not isinstance(trigger, dict) or trigger.get("type") != "input_tokens":
        raise Refused(f"{where}.type: Input should be 'input_tokens'")
    value: Any = trigger.get("value")
    if not is_int(value) or int(value) < ANTHROPIC_MIN_TRIGGER:
        raise Refused(
            f"{where}.value: Input should be greater than or equal to {ANTHROPIC_MIN_TRIGGER}"
        )


def _check_anthropic_block(block: dict[str, Any], where: str) -> None:
    if "content" not in block:
        raise Refused(f"{where}.compaction.content: Field required")
    content = block["content"]
    if content is not None and (not isinstance(content, str) or not content):
        raise Refused(f"{where}.compaction.content: Input should be a non-empty string or null")
    encrypted = block.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise Refused(f"{where}.compaction.encrypted_content: Input should be a valid string")


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


def check_responses(body: dict[str, Any], call: Any) -> None:
    """``context_management`` entries, and compaction items sent back."""
    management = body.get("context_management")
    if management is not None:
        if not isinstance(management, list):
            raise Refused(
                "Invalid type for 'context_management': expected an array, but got "
                f"{type(management).__name__} instead.",
                "context_management",
                "invalid_type",
            )
        for i, entry in enumerate(management):
            _check_responses_entry(entry, f"context_management[{i}]")
    raw = body.get("input")
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        if isinstance(item, dict) and item.get("type") == "compaction":
            _check_responses_item(item, f"input[{i}]", call)


def _check_responses_entry(entry: Any, where: str) -> None:
    if not isinstance(entry, dict) or entry.get("type") != "compaction":
        kind = entry.get("type") if isinstance(entry, dict) else entry
        raise Refused(
            f"Invalid value: '{kind}'. Supported values are: 'compaction'.",
            f"{where}.type",
            "invalid_value",
        )
    extra = set(entry) - {"type", "compact_threshold"}
    if extra:
        name = sorted(extra)[0]
        raise Refused(
            f"Unknown parameter: '{where}.{name}'.", f"{where}.{name}", "unknown_parameter"
        )
    threshold = entry.get("compact_threshold")
    if threshold is not None and (not is_int(threshold) or threshold < 1):
        raise Refused(
            f"Invalid '{where}.compact_threshold': expected an integer of at least 1.",
            f"{where}.compact_threshold",
            "invalid_value",
        )


def _check_responses_item(item: dict[str, Any], where: str, call: Any) -> None:
    content = item.get("encrypted_content")
    if not isinstance(content, str):
        raise Refused(
            f"Missing required parameter: '{where}.encrypted_content'.",
            f"{where}.encrypted_content",
            "missing_required_parameter",
        )
    strict = call is None or call.env.strict_signatures
    if strict and not opens_encrypted_content(SEAL_KIND, content):
        raise Refused(
            f"The encrypted content for item {item.get('id') or where} could not be verified.",
            where,
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
    users = [
        item
        for item in items
        if item.get("type", "message") == "message" and item.get("role") == "user"
    ]
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
