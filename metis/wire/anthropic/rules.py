"""What the Anthropic Messages API accepts around thinking, tool choice and sampling.

The rules, from Anthropic's extended-thinking documentation and the SDK's request types
(``ThinkingConfigEnabledParam``: "Must be >= 1024 and less than ``max_tokens``";
``ToolChoiceNoneParam`` has no ``disable_parallel_tool_use``):

- manual thinking (``type: enabled``) cannot be combined with a forced tool choice (``any`` or
  a named tool); adaptive thinking can;
- with thinking on, ``temperature`` may only be 1, ``top_k`` may not be set and ``top_p`` must
  lie between 0.95 and 1;
- one thinking setting per assistant turn, and a tool loop is one turn: while a loop is open
  (the request ends with tool results) and manual thinking is on, the loop's first assistant
  message must start with a thinking block (400 "a final assistant message must start with a
  thinking block"); adaptive thinking, which may not think, does not ask it (0xPlaygrounds/rig's
  opus_4_7 adaptive_thinking_streaming_tool_roundtrip_smoke cassette: 200);
- some models differ (:class:`ModelTraits`): Claude Opus 4.7 takes no sampling parameters (400
  "temperature is deprecated for this model") and thinks only in adaptive mode.

Per-model differences come from :data:`model_traits`, a lookup a model catalog can replace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from metis.wire.anthropic.tool_pairs import SERVER_RESULTS as SERVER_RESULTS
from metis.wire.anthropic.tool_pairs import tool_pairs as tool_pairs
from metis.wire.refusal import Refusal

MIN_THINKING_BUDGET = 1024
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


@dataclass(frozen=True, slots=True)
class ModelTraits:
    """What one Anthropic model accepts, where models differ."""

    sampling: bool = True
    """Takes ``temperature``, ``top_p`` and ``top_k``."""
    thinking_modes: frozenset[str] = frozenset({"enabled", "adaptive"})
    """The ``thinking.type`` values it accepts besides ``disabled``."""


DEFAULT_TRAITS = ModelTraits()
_KNOWN: dict[str, ModelTraits] = {
    # Migrating to Claude Opus 4.7: sampling parameters removed, adaptive-only thinking.
    "claude-opus-4-7": ModelTraits(sampling=False, thinking_modes=frozenset({"adaptive"})),
}


def builtin_model_traits(model: str) -> ModelTraits:
    """The traits of the longest known model-name prefix, else the defaults."""
    known = [prefix for prefix in _KNOWN if model.startswith(prefix)]
    return _KNOWN[max(known, key=len)] if known else DEFAULT_TRAITS


def catalog_model_traits(model: str) -> ModelTraits:
    """The built-in traits where they name the model, else what the model catalog knows of it
    (metis/catalog/knobs.py, which reads a Claude model's name when it has no entry): one that
    refuses sampling takes none; one that thinks by a budget takes no adaptive thinking, one
    that thinks only adaptively no budget. Read once per model and catalog entry: a request's
    checks ask on every call, and the entry's reading costs tens of microseconds."""
    known = [prefix for prefix in _KNOWN if model.startswith(prefix)]
    if known:
        return _KNOWN[max(known, key=len)]
    from metis.catalog.lookup import find_model

    info = find_model("anthropic", model)
    kept = _READ.get(model)
    if kept is not None and kept[0] is info:  # the same entry (a catalog refresh makes new ones)
        return kept[1]
    traits = _catalog_traits(model, info)
    if len(_READ) >= _READ_AT_MOST:
        _READ.clear()
    _READ[model] = (info, traits)
    return traits


_READ: dict[str, tuple[object, ModelTraits]] = {}
"""The traits read of each model's catalog entry, with the entry they were read from."""
_READ_AT_MOST = 256


def _catalog_traits(model: str, info: Any) -> ModelTraits:
    from metis.catalog.knobs import reasoning_profile, refused_sampling
    from metis.catalog.model_info import ModelInfo

    if info is None:
        if "claude" not in model.lower():
            return DEFAULT_TRAITS
        info = ModelInfo(provider="anthropic", id=model, reasoning=True)
    profile = reasoning_profile(info)
    modes = DEFAULT_TRAITS.thinking_modes
    if profile is not None and profile.form == "budget":
        modes = frozenset({"enabled"})
    elif profile is not None and profile.form == "adaptive" and profile.budget_max is None:
        modes = frozenset({"adaptive"})
    return ModelTraits(sampling=not refused_sampling(info), thinking_modes=modes)


model_traits: Callable[[str], ModelTraits] = catalog_model_traits
"""The per-model lookup the rules and the encoder use (the catalog, docs/catalog.md)."""


def parameter_problems(body: dict[str, Any]) -> list[str]:
    """Thinking, tool-choice and sampling problems of a Messages API body."""
    traits = model_traits(str(body.get("model", "")))
    problems = _tool_choice_problems(body)
    problems += _sampling_problems(body, traits)
    problems += _output_format_problems(body)
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") in (None, "disabled"):
        return problems
    mode = thinking.get("type")
    if mode not in traits.thinking_modes:
        problems.append(
            f"thinking.type: {body.get('model')} does not accept {mode!r} thinking "
            f"(it accepts {', '.join(sorted(traits.thinking_modes)) or 'none'})"
        )
    if mode == "enabled":
        problems += _budget_problems(thinking)
        problems += [refusal.message for refusal in budget_under_max_tokens(body)]
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
            problems.append(
                f"tool_choice: {choice.get('type')!r} forces tool use, which manual thinking "
                "does not allow (only auto or none)"
            )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        problems.append("temperature: may only be 1 when thinking is on")
    if "top_k" in body:
        problems.append("top_k: may not be set when thinking is on")
    top_p = body.get("top_p")
    if top_p is not None and not (isinstance(top_p, int | float) and 0.95 <= top_p <= 1):
        problems.append("top_p: must be between 0.95 and 1 when thinking is on")
    problems += [refusal.message for refusal in open_turn(body)]
    return problems


def _output_format_problems(body: dict[str, Any]) -> list[str]:
    """Structured output takes closed objects only (400 "For 'object' type,
    'additionalProperties' must be explicitly set to false"); the encoder closes what it can."""
    from metis.wire.closed_schema import closed_schema_or_reason

    fmt = (body.get("output_config") or {}).get("format")
    if not isinstance(fmt, dict) or "schema" not in fmt:
        return []
    _, reason = closed_schema_or_reason(fmt["schema"])
    return [f"output_config.format.schema: {reason}"] if reason else []


def open_turn(body: dict[str, Any]) -> Iterator[Refusal]:
    """With manual thinking on, the assistant message that opens the tool loop still in
    progress (the request ends with tool results) starts with a thinking block."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return
    messages = body.get("messages")
    first = open_turn_start(messages)
    if first is None or starts_with_thinking(messages[first]):  # type: ignore[index]
        return
    content = messages[first].get("content")  # type: ignore[index]
    block = content[0] if isinstance(content, list) and content else {"type": "text"}
    kind = block.get("type") if isinstance(block, dict) else None
    yield Refusal(
        f"messages.{first}.content.0.type: Expected `thinking` or `redacted_thinking`, "
        f"but found `{kind}`. When `thinking` is enabled, a final `assistant` message must "
        "start with a thinking block (preceeding the lastmost set of `tool_use` and "
        "`tool_result` blocks). We recommend you include thinking blocks from previous "
        "turns. To avoid this requirement, disable `thinking`."
    )


def open_turn_start(messages: Any) -> int | None:
    """Where the assistant turn still in progress starts, when the request ends inside a tool
    loop (its last message gives tool results); None otherwise."""
    if not isinstance(messages, list) or not messages or not _gives_results(messages[-1]):
        return None
    first = None
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, dict):
            return None
        if message.get("role") == "assistant":
            first = i
        elif not _gives_results(message):
            break  # a user message of its own closes the previous turn
    return first


def starts_with_thinking(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return False
    return content[0].get("type") in _THINKING_BLOCKS


def _gives_results(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _budget_problems(thinking: dict[str, Any]) -> list[str]:
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return ["thinking.budget_tokens: required, an integer"]
    if budget < MIN_THINKING_BUDGET:
        return [f"thinking.budget_tokens: must be at least {MIN_THINKING_BUDGET}"]
    return []


THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
"""Anthropic's page on extended thinking, which its thinking-budget refusals point to."""


def budget_under_max_tokens(body: dict[str, Any]) -> Iterator[Refusal]:
    """Manual thinking's budget is less than ``max_tokens``."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return
    budget: Any = thinking.get("budget_tokens")
    most: Any = body.get("max_tokens")
    if _is_int(budget) and _is_int(most) and most <= budget:
        yield Refusal(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {THINKING_DOCS}#max-tokens-and-context-window-size"
        )


def chosen_tool(body: dict[str, Any]) -> Iterator[Refusal]:
    """A tool choice names one of the request's tools."""
    choice = body.get("tool_choice")
    tools = body.get("tools")
    names = {t.get("name") for t in tools if isinstance(t, dict)} if isinstance(tools, list) else ()
    if (
        isinstance(choice, dict)
        and choice.get("type") == "tool"
        and choice.get("name") not in names
    ):
        yield Refusal(f"Tool '{choice.get('name')}' not found in tools.")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tool_choice_problems(body: dict[str, Any]) -> list[str]:
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        return []
    problems = []
    if not body.get("tools"):
        problems.append("tool_choice: may only be set when tools are given")
    if choice.get("type") == "none" and "disable_parallel_tool_use" in choice:
        problems.append("tool_choice.disable_parallel_tool_use: only auto, any and tool take it")
    problems += [refusal.message for refusal in chosen_tool(body)]
    return problems


def _sampling_problems(body: dict[str, Any], traits: ModelTraits) -> list[str]:
    if traits.sampling:
        return []
    return [
        f"{name}: {body.get('model')} takes no sampling parameters"
        for name in ("temperature", "top_p", "top_k")
        if name in body
    ]
