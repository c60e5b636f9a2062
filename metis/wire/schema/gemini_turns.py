"""Gemini's order of turns: a turn of function calls must follow a user turn or function
responses ("Please ensure that function call turn comes immediately after a user turn or after a
function response turn."). A history whose calls open the conversation, or follow a model turn
of text, gets a short user turn before them, as Claude's and OpenAI's APIs need none
(google-gemini/gemini-cli#11814: a history starting with a function call is a 400)."""

from __future__ import annotations

from typing import Any

from metis.wire.codec import EncodeContext
from metis.wire.rules import turn_kind

OPENING = "Continue."
"""The user turn put before function calls that have none (Gemini refuses empty text)."""


def anchor_calls(body: dict[str, Any], call: EncodeContext) -> None:
    """Put a user turn before each turn of function calls that follows no user turn or
    function responses, and say so."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        return
    out: list[Any] = []
    previous = ""
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        parts = [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        kind = turn_kind(content.get("role") if isinstance(content, dict) else None, parts)
        if kind == "calls" and previous not in ("user", "responses"):
            out.append({"role": "user", "parts": [{"text": OPENING}]})
            call.warn_dropped(
                "turn order",
                f"Gemini takes function calls only after a user turn: a user turn "
                f"({OPENING!r}) was put before contents[{len(out) - 1}]",
            )
        out.append(content)
        previous = kind
    if len(out) != len(contents):
        body["contents"] = out
