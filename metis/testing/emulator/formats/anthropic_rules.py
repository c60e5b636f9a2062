"""What the Anthropic Messages API refuses with a 400: its table (``tables/anthropic.yaml``)
and the checks it names, for what relates one part of a request to another.
"""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.formats import compaction, image_bytes, server_rules, strict_tools
from metis.testing.emulator.formats.cache_marks import check_breakpoint_limit
from metis.testing.emulator.formats.knobs_rules import check_anthropic
from metis.testing.emulator.rules import Refused, first, table
from metis.testing.emulator.wire import verify
from metis.wire.anthropic.rules import budget_under_max_tokens, chosen_tool, open_turn
from metis.wire.anthropic.tool_pairs import tool_pairs
from metis.wire.media_rules import anthropic_media

SIGNATURE_KIND = "anthropic-thinking"
_FILE = re.compile(r"file_[A-Za-z0-9]+")
"""The file ids this emulator "issued": every well-formed one (docs/emulator.md)."""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _check_signatures(body: dict[str, Any], call: Any) -> None:
    """Thinking signatures only this emulator issued."""
    if call is not None and not call.env.strict_signatures:
        return
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(_blocks(message)):
            kind = block.get("type")
            if kind == "thinking" and not verify(
                SIGNATURE_KIND, block["thinking"], block["signature"]
            ):
                raise Refused(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")


RULES = table(
    "anthropic",
    {
        "strict tools": strict_tools.check_anthropic,
        "chosen tool": first(chosen_tool),
        "budget under max_tokens": first(budget_under_max_tokens),
        "files": first(lambda body: anthropic_media(body, lambda id: bool(_FILE.fullmatch(id)))),
        "image bytes": image_bytes.check_anthropic,
        "server tools": server_rules.anthropic,
        "compaction beta": compaction.check_anthropic_beta,
        "signatures": _check_signatures,
        "turn opens with thinking": first(open_turn),
        "tool pairs": first(lambda body: tool_pairs(body["messages"])),
        "model settings": check_anthropic,
        "cache breakpoints": check_breakpoint_limit,
    },
)
