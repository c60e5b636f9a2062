"""What the Anthropic Messages API refuses with a 400, in its own words (pydantic-style
``path: problem`` messages), in the order it checks.
"""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.formats import compaction, files_rules, server_rules, strict_tools
from metis.testing.emulator.formats.cache_marks import check_breakpoint_limit
from metis.testing.emulator.formats.knobs_rules import check_anthropic
from metis.testing.emulator.rules import (
    Check,
    Refused,
    Rule,
    Test,
    anything,
    array,
    at_least,
    at_most,
    boolean,
    either,
    matches,
    names,
    never,
    nonempty,
    not_below,
    number,
    obj,
    one_of,
    placeholders,
    string,
    text,
    typed,
)
from metis.testing.emulator.wire import verify

TOP_LEVEL = names(
    "model messages max_tokens system metadata stop_sequences stream temperature top_p top_k "
    "tools tool_choice thinking service_tier container mcp_servers context_management "
    "output_config output_format inference_geo cache_control diagnostics speed user_profile_id "
    "workspace_id billing_policy compaction fallbacks fallback_credit_token thread"
)
BLOCKS = names(
    "text image document search_result tool_use tool_result thinking redacted_thinking "
    "server_tool_use web_search_tool_result web_fetch_tool_result code_execution_tool_result "
    "bash_code_execution_tool_result text_editor_code_execution_tool_result mcp_tool_use "
    "mcp_tool_result container_upload tool_search_tool_result tool_reference "
    "advisor_tool_result compaction fallback mcp_tool_listing tool_addition tool_removal"
)
SIGNATURE_KIND = "anthropic-thinking"
# Opus 4.7 and later: sampling parameters and manual thinking removed (adaptive only).
ADAPTIVE_ONLY = re.compile(r"^claude-opus-4-7")
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _adaptive_only(body: dict[str, Any]) -> bool:
    return isinstance(body.get("model"), str) and bool(ADAPTIVE_ONLY.match(body["model"]))


def _thinking(*kinds: str) -> Any:
    return lambda body: (
        isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in kinds
    )


def _choice(kind: str) -> Any:
    return lambda body: (
        isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("type") == kind
    )


def _check_unique_tools(body: dict[str, Any], call: Any) -> None:
    names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if len(names) != len(set(names)):
        raise Refused("tools: Tool names must be unique.")


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


OWNER = {
    "tool_use": "assistant",
    "tool_result": "user",
    "thinking": "assistant",
    "redacted_thinking": "assistant",
    "compaction": "assistant",
}


def _check_blocks(body: dict[str, Any], call: Any) -> None:
    """Blocks only their role may send, and thinking signatures only this emulator issued."""
    strict = call is None or call.env.strict_signatures
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(_blocks(message)):
            kind, where = block.get("type"), f"messages.{i}.content.{j}"
            owner = OWNER.get(str(kind))
            if owner is not None and message["role"] != owner:
                raise Refused(f"{where}: `{kind}` blocks can only be in `{owner}` messages")
            signed = kind != "thinking" or verify(
                SIGNATURE_KIND, block["thinking"], block["signature"]
            )
            if strict and not signed:
                raise Refused(f"{where}: Invalid `signature` in `thinking` block")


def _unanswered(at: int, ids: list[str]) -> Refused:
    return Refused(
        f"messages.{at}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )


def _check_tool_pairs(body: dict[str, Any], call: Any) -> None:
    """Every tool_use is answered in the very next message, and only those."""
    pending: list[str] = []
    for i, message in enumerate(body["messages"]):
        blocks = _blocks(message)
        results = [b for b in blocks if b.get("type") == "tool_result"]
        answered = {b["tool_use_id"] for b in results}
        missing = [p for p in pending if p not in answered]
        if pending and (message["role"] != "user" or missing):
            raise _unanswered(i - 1, missing or pending)
        stray = [
            j for j, b in enumerate(blocks) if b in results and b["tool_use_id"] not in pending
        ]
        if stray:
            raise Refused(
                f"messages.{i}.content.{stray[0]}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {blocks[stray[0]]['tool_use_id']}. Each `tool_result` "
                "block must have a corresponding `tool_use` block in the previous message."
            )
        if results and any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
            raise Refused(f"messages.{i}: `tool_result` blocks must come first in the content")
        pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if pending:  # a trailing assistant message with open tool calls: a prefill it refuses
        raise _unanswered(len(body["messages"]) - 1, pending)


def required(where: str, at: str = "", test: Test = anything, **options: Any) -> Rule:
    """The field at ``where`` (named ``at`` in the message) must be there (and pass ``test``)."""
    return Rule(
        where, test, f"{at or placeholders(where)}: Field required", required=True, **options
    )


def should(where: str, test: Test, what: str, at: str = "", **options: Any) -> Rule:
    """The value at ``where`` must pass ``test``: "Input should be ``what``"."""
    return Rule(where, test, f"{at or placeholders(where)}: Input should be {what}", **options)


CUSTOM = "tools.*[type=custom|]"
AT_CUSTOM = "tools.{0}.custom.input_schema"
BLOCK = "messages.*.content.*"
AT_BLOCK = "messages.{0}.content.{1}"
RULES: list[Rule | Check] = [
    Rule("~", one_of(*TOP_LEVEL), "{value}: Extra inputs are not permitted"),
    required("model", test=text),
    required("max_tokens"),
    should("max_tokens", at_least(1), "greater than or equal to 1"),
    should("stream", boolean, "a valid boolean", nullable=False),
    should("temperature", number, "a valid number"),
    should("temperature", at_most(1), "less than or equal to 1"),
    should("temperature", not_below(0), "greater than or equal to 0"),
    *(
        Rule(name, never, f"`{name}` is deprecated for this model.", when=_adaptive_only)
        for name in ("temperature", "top_p", "top_k")
    ),
    Rule(
        "thinking.type",
        one_of("disabled", "adaptive"),
        "thinking.type: 'enabled' is not supported for this model; use 'adaptive'",
        when=_adaptive_only,
    ),
    should("system", either(string, array), "a valid string or a list of text blocks"),
    should("system.*", typed("type", one_of("text")), "'text'", at="system.{0}.type"),
    required("system.*.text"),
    should("tools", array, "a valid list"),
    should("tools.*", obj, "a valid dictionary"),
    required("tools.*[type!=custom|].name", test=string),
    Rule(
        f"{CUSTOM}.name",
        matches(r"[a-zA-Z0-9_-]{1,128}"),
        "tools.{0}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'",
        required=True,
    ),
    required(f"{CUSTOM}.input_schema", AT_CUSTOM, obj),
    should(
        f"{CUSTOM}.input_schema.type",
        one_of("object"),
        "'object'",
        AT_CUSTOM + ".type",
        required=True,
    ),
    _check_unique_tools,
    strict_tools.check_anthropic,
    Rule(
        "tool_choice",
        never,
        "tool_choice may only be specified while providing tools.",
        when=lambda body: not body.get("tools"),
    ),
    Rule(
        "tool_choice",
        typed("type", one_of("auto", "any", "tool", "none")),
        "tool_choice: Input tag found using 'type' does not match any of the expected tags: "
        "'auto', 'any', 'tool', 'none'",
    ),
    Rule(
        "tool_choice.disable_parallel_tool_use",
        never,
        "tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted",
        when=_choice("none"),
    ),
    required("tool_choice.name", "tool_choice.tool.name", string, when=_choice("tool")),
    _check_chosen_tool,
    Rule(
        "thinking",
        typed("type", one_of("enabled", "disabled", "adaptive")),
        "thinking: Input tag found using 'type' does not match any of the expected tags: "
        "'enabled', 'disabled', 'adaptive'",
    ),
    required("thinking.budget_tokens", "thinking.enabled.budget_tokens", when=_thinking("enabled")),
    should(
        "thinking.budget_tokens",
        at_least(1024),
        "greater than or equal to 1024",
        at="thinking.enabled.budget_tokens",
        when=_thinking("enabled"),
    ),
    _check_budget,
    Rule(
        "temperature",
        one_of(1),
        "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. "
        f"Please consult our documentation at {DOCS}#feature-compatibility",
        when=_thinking("enabled", "adaptive"),
    ),
    Rule(
        "tool_choice.type",
        one_of("auto", "none"),
        "Thinking may not be enabled when tool_choice forces tool use.",
        when=_thinking("enabled"),
    ),
    Rule(
        "top_k",
        never,
        "`top_k` may not be set when thinking is enabled.",
        when=_thinking("enabled", "adaptive"),
        nullable=False,
    ),
    required("messages"),
    should("messages", array, "a valid list"),
    Rule("messages", nonempty, "messages: at least one message is required"),
    should("messages.*", obj, "a valid dictionary"),
    should(
        "messages.*.role",
        one_of("user", "assistant", "system"),
        "'user', 'assistant' or 'system'",
        required=True,
    ),
    required("messages.*.content"),
    should("messages.*.content", either(string, array), "a valid string or list"),
    should(BLOCK, typed("type", string), "a valid dictionary with a 'type'"),
    Rule(
        f"{BLOCK}.type",
        one_of(*BLOCKS),
        AT_BLOCK
        + ": Input tag '{value}' found using 'type' does not match any of the expected tags",
    ),
    should("messages.*[role=system].content.*.type", one_of("text"), "'text'"),
    required(f"{BLOCK}[type=text].text", AT_BLOCK + ".text.text", string),
    Rule(
        f"{BLOCK}[type=text].text",
        lambda value: bool(value.strip()),
        AT_BLOCK + ": text content blocks must contain non-whitespace text",
    ),
    Rule(
        f"{BLOCK}[type=tool_use]",
        lambda block: isinstance(block.get("id"), str) and isinstance(block.get("name"), str),
        AT_BLOCK + ".tool_use: `id` and `name` are required",
    ),
    Rule(
        f"{BLOCK}[type=tool_use].id",
        matches(r"[a-zA-Z0-9_-]+"),
        AT_BLOCK + ".tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    ),
    should(
        f"{BLOCK}[type=tool_use].input",
        obj,
        "a valid dictionary",
        AT_BLOCK + ".tool_use.input",
        required=True,
    ),
    required(
        f"{BLOCK}[type=tool_result].tool_use_id", AT_BLOCK + ".tool_result.tool_use_id", string
    ),
    Rule(
        f"{BLOCK}[type=thinking]",
        lambda block: (
            isinstance(block.get("thinking"), str) and isinstance(block.get("signature"), str)
        ),
        AT_BLOCK + ".thinking: `thinking` and `signature` are required",
    ),
    files_rules.anthropic,
    server_rules.anthropic,
    compaction.check_anthropic,
    _check_blocks,
    _check_turn_opens_with_thinking,
    _check_tool_pairs,
    check_anthropic,
    check_breakpoint_limit,
]
