"""The Converse wire format for the Bedrock emulator: request -> Prompt, Reply -> response.

Validated as the Converse API refuses: a conversation that does not start with a user
message or does not alternate roles, blank text, unknown content blocks, tool blocks without a
``toolConfig``, a ``toolResult`` that answers no ``toolUse`` of the previous message, tool use
left unanswered, tool names outside ``[a-zA-Z0-9_-]{1,64}``, and reasoning signatures this
emulator did not issue. Messages are ValueErrors; the caller answers them as a
ValidationException.
"""

from __future__ import annotations

import json
import re
from typing import Any

from metis.testing.emulator import files
from metis.testing.emulator._wire import (
    Env,
    Ids,
    dumps,
    is_int,
    signature,
    split_json,
    split_text,
    text_of,
    tool_name_ok,
    verify,
)
from metis.testing.emulator.responder import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn

SIGNATURE_KIND = "bedrock-reasoning"
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BLOCKS = {"text", "image", "toolUse", "toolResult", "reasoningContent", "document", "cachePoint"}
_BLOCKS |= {"audio", "video"}
_TOP_LEVEL = {
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "additionalModelRequestFields",
    "guardrailConfig",
    "promptVariables",
    "requestMetadata",
    "performanceConfig",
    "additionalModelResponseFieldPaths",
}


def converse_prompt(model: str, body: dict[str, Any], env: Env) -> Prompt:
    for key in body:
        if key not in _TOP_LEVEL:
            raise ValueError(f"Malformed input request: extraneous key [{key}] is not permitted")
    system = body.get("system") or []
    if not isinstance(system, list) or not all(isinstance(b, dict) for b in system):
        raise ValueError("system: must be a list of SystemContentBlock objects")
    system_text = "\n".join(b["text"] for b in system if isinstance(b.get("text"), str))
    inference = body.get("inferenceConfig") or {}
    max_tokens = inference.get("maxTokens")
    if max_tokens is not None and (not is_int(max_tokens) or max_tokens < 1):
        raise ValueError("inferenceConfig.maxTokens: must be a positive integer")
    tools, choice = _tool_config(body.get("toolConfig"))
    refused = files.converse(body.get("messages"))
    if refused is not None:
        raise ValueError(refused)
    turns, segments = _turns(body.get("messages"), bool(tools), env)
    thinking = (body.get("additionalModelRequestFields") or {}).get("thinking") or {}
    return Prompt(
        model=model,
        turns=turns,
        system=system_text,
        tools=tools,
        tool_choice=choice,
        thinking=thinking.get("type") == "enabled",
        max_tokens=max_tokens,
        segments=[dumps(body.get("toolConfig") or {}).decode() + system_text, *segments],
    )


def _tool_config(config: Any) -> tuple[list[ToolSpec], str]:
    if config is None:
        return [], "auto"
    tools: list[ToolSpec] = []
    for i, tool in enumerate(config.get("tools") or []):
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if not isinstance(spec, dict) or not tool_name_ok(spec.get("name")):
            raise ValueError(
                f"toolConfig.tools.{i}.toolSpec.name: must match [a-zA-Z0-9_-]{{1,64}}"
            )
        schema = (spec.get("inputSchema") or {}).get("json")
        if not isinstance(schema, dict):
            raise ValueError(f"toolConfig.tools.{i}.toolSpec.inputSchema.json: required")
        tools.append(ToolSpec(spec["name"], spec.get("description", ""), schema))
    if not tools:
        raise ValueError("toolConfig.tools: must have length greater than or equal to 1")
    choice = config.get("toolChoice") or {"auto": {}}
    if "tool" in choice:
        return tools, f"tool:{choice['tool'].get('name')}"
    return tools, "required" if "any" in choice else "auto"


def _turns(raw: Any, has_tools: bool, env: Env) -> tuple[list[Turn], list[str]]:
    if not isinstance(raw, list) or not raw:
        raise ValueError("messages: must have length greater than or equal to 1")
    turns: list[Turn] = []
    segments: list[str] = []
    open_calls: set[str] = set()
    for i, message in enumerate(raw):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise ValueError(f"messages.{i}.role: must be user or assistant")
        if not turns and role != "user":
            raise ValueError(
                "A conversation must start with a user message. Try again with a "
                "conversation that starts with a user message."
            )
        if turns and turns[-1].role == role:
            raise ValueError(
                "A conversation must alternate between user and assistant roles. Make sure "
                "the conversation alternates between user and assistant roles and try again."
            )
        turn = _turn(i, role, message.get("content"), has_tools, env)
        answered = {r.call_id for r in turn.results}
        if answered - open_calls:
            raise ValueError(
                f"messages.{i}: The toolResult blocks at messages.{i}.content contain "
                "toolUseIds that do not match the toolUse blocks of the previous turn."
            )
        if open_calls and not open_calls <= answered:
            raise ValueError(
                f"messages.{i}: Expected toolResult blocks at messages.{i}.content for the "
                f"following Ids: {', '.join(sorted(open_calls - answered))}"
            )
        open_calls = {c.id for c in turn.calls}
        turns.append(turn)
        segments.append(dumps(message).decode())
    return turns, segments


def _turn(i: int, role: str, content: Any, has_tools: bool, env: Env) -> Turn:
    if not isinstance(content, list) or not content:
        raise ValueError(f"messages.{i}.content: must have length greater than or equal to 1")
    turn = Turn(role=role)  # type: ignore[arg-type]
    texts: list[str] = []
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        kinds = list(block) if isinstance(block, dict) else []
        if len(kinds) != 1 or kinds[0] not in _BLOCKS:
            raise ValueError(f"{where}: must hold exactly one known content block member")
        kind, value = kinds[0], block[kinds[0]]
        if kind == "text":
            if not isinstance(value, str) or not value.strip():
                raise ValueError(
                    "The text field in the ContentBlock object at "
                    f"{where} is blank. Add text to the text field, and try again."
                )
            texts.append(value)
        elif kind in ("toolUse", "toolResult"):
            if not has_tools:
                raise ValueError(
                    "The toolConfig field must be defined when using toolUse and toolResult "
                    "content blocks."
                )
            _tool_block(kind, value, role, where, turn)
        elif kind == "reasoningContent":
            _reasoning(value, role, where, env)
    turn.text = "\n".join(texts)
    return turn


def _tool_block(kind: str, value: Any, role: str, where: str, turn: Turn) -> None:
    tool_id = value.get("toolUseId") if isinstance(value, dict) else None
    if not isinstance(tool_id, str) or not _TOOL_ID.match(tool_id):
        raise ValueError(f"{where}.{kind}.toolUseId: must match [a-zA-Z0-9_-]{{1,64}}")
    if kind == "toolUse":
        if role != "assistant" or not isinstance(value.get("input"), dict):
            raise ValueError(f"{where}.toolUse: an assistant block with an object input")
        turn.calls.append(CallIn(tool_id, value.get("name", ""), value["input"]))
        return
    if role != "user":
        raise ValueError(f"{where}.toolResult: only in user messages")
    parts = value.get("content")
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"{where}.toolResult.content: must have length greater than or equal to 1")
    content = text_of([p.get("text") or json.dumps(p.get("json")) for p in parts])
    turn.results.append(ResultIn(tool_id, content, None, value.get("status") == "error"))


def _reasoning(value: Any, role: str, where: str, env: Env) -> None:
    if role != "assistant":
        raise ValueError(f"{where}.reasoningContent: only in assistant messages")
    text = (value or {}).get("reasoningText") if isinstance(value, dict) else None
    if text is None:
        return  # redactedContent: opaque, passed back as it came
    if env.strict_signatures and not verify(
        SIGNATURE_KIND, str(text.get("text")), str(text.get("signature"))
    ):
        raise ValueError(f"{where}.reasoningContent: the reasoning signature is invalid")


def converse_message(reply: Reply, ids: Ids) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        sig = signature(SIGNATURE_KIND, reply.thinking)
        content.append(
            {"reasoningContent": {"reasoningText": {"text": reply.thinking, "signature": sig}}}
        )
    if reply.text:
        content.append({"text": reply.text})
    for call in reply.calls:
        tool_id = "tooluse_" + ids.token(22, "alnum")
        content.append({"toolUse": {"toolUseId": tool_id, "name": call.name, "input": call.args}})
    usage = reply.usage
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": reply.stop,
        "usage": {
            "inputTokens": usage.uncached_input,
            "outputTokens": usage.output_tokens,
            "totalTokens": usage.uncached_input + usage.output_tokens,
            "cacheReadInputTokens": usage.cache_read,
            "cacheWriteInputTokens": usage.cache_write,
        },
        "metrics": {"latencyMs": 42},
    }


def stream_events(message: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    """ConverseStream's events for ``message``, in order, with the padding field ``p`` the
    service adds to some of them (as recorded)."""
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant", "p": "abc"})]
    for index, block in enumerate(message["output"]["message"]["content"]):

        def delta(value: dict[str, Any], i: int = index) -> None:
            events.append(("contentBlockDelta", {"contentBlockIndex": i, "delta": value}))

        if "reasoningContent" in block:
            text = block["reasoningContent"]["reasoningText"]
            for piece in split_text(text["text"]):
                delta({"reasoningContent": {"text": piece}})
            delta({"reasoningContent": {"signature": text["signature"]}})
        elif "text" in block:
            for piece in split_text(block["text"]):
                delta({"text": piece})
        else:
            tool = block["toolUse"]
            start = {"toolUse": {"toolUseId": tool["toolUseId"], "name": tool["name"]}}
            events.append(("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            for piece in split_json(dumps(tool["input"]).decode()) if tool["input"] else []:
                delta({"toolUse": {"input": piece}})
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
    events.append(("messageStop", {"stopReason": reply.stop, "p": "abcdefgh"}))
    events.append(("metadata", {"usage": message["usage"], "metrics": message["metrics"]}))
    return events
