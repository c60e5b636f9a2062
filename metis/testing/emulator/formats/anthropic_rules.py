"""What the Anthropic Messages API refuses with a 400: its table (``tables/anthropic.yaml``)
and the checks it names, for what relates one part of a request to another.
"""

from __future__ import annotations

from typing import Any

from metis.testing.emulator.formats import compaction, files_rules, server_rules, strict_tools
from metis.testing.emulator.formats.cache_marks import check_breakpoint_limit
from metis.testing.emulator.formats.knobs_rules import check_anthropic
from metis.testing.emulator.rules import Refused, first, table
from metis.testing.emulator.wire import verify
from metis.wire.anthropic.rules import tool_pairs

SIGNATURE_KIND = "anthropic-thinking"
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _thinking(*kinds: str) -> Any:
    return lambda body: (
        isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in kinds
    )


def _check_chosen_tool(body: dict[str, Any], call: Any) -> None:
    choice = body.get("tool_choice")
    names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice["name"] not in names:
        raise Refused(f"Tool '{choice['name']}' not found in tools.")


def _check_budget(body: dict[str, Any], call: Any) -> None:
    if _thinking("enabled")(body) and body["max_tokens"] <= body["thinking"]["budget_tokens"]:
        raise Refused(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {DOCS}#max-tokens-and-context-window-size"
        )


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _check_turn_opens_with_thinking(body: dict[str, Any], call: Any) -> None:
    """With thinking on, the assistant turn still in progress (a tool loop: the request ends
    with tool results) must open with a thinking block."""
    messages = body["messages"]

    def results_only(message: dict[str, Any]) -> bool:
        return message["role"] == "user" and any(
            b.get("type") == "tool_result" for b in _blocks(message)
        )

    if not _thinking("enabled", "adaptive")(body) or not results_only(messages[-1]):
        return
    opening = None
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "assistant":
            opening = i
        elif not results_only(messages[i]):
            break
    kind = _blocks(messages[opening])[0].get("type") if opening is not None else "thinking"
    if kind not in ("thinking", "redacted_thinking"):
        raise Refused(
            f"messages.{opening}.content.0.type: Expected `thinking` or `redacted_thinking`, "
            f"but found `{kind}`. When `thinking` is enabled, a final `assistant` message must "
            "start with a thinking block (preceeding the lastmost set of `tool_use` and "
            "`tool_result` blocks). We recommend you include thinking blocks from previous "
            "turns. To avoid this requirement, disable `thinking`."
        )


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
        "chosen tool": _check_chosen_tool,
        "budget under max_tokens": _check_budget,
        "files": files_rules.anthropic,
        "server tools": server_rules.anthropic,
        "compaction beta": compaction.check_anthropic_beta,
        "signatures": _check_signatures,
        "turn opens with thinking": _check_turn_opens_with_thinking,
        "tool pairs": first(lambda body: tool_pairs(body["messages"])),
        "model settings": check_anthropic,
        "cache breakpoints": check_breakpoint_limit,
    },
)
