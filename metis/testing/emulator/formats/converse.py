"""The Converse wire format (AWS Bedrock): what it refuses (a ``ValidationException``: its table
is ``tables/converse.yaml``, with the checks below), how its request reads and its reply renders
and streams.

Refused as Converse refuses: unknown top-level keys, blank text, unknown content blocks, tool
names outside ``[a-zA-Z0-9_-]{1,64}`` (rows), blocks a role may not send and reasoning
signatures this emulator did not issue (``blocks``), and the conversation's order, the
client's rule too (``turns``: metis/wire/bedrock_converse/rules.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from metis.testing.emulator.formats import files_rules, server_rules, strict_tools
from metis.testing.emulator.formats.cache_marks import (
    block_counts,
    converse_breakpoints,
    unmarked,
)
from metis.testing.emulator.formats.knobs_rules import check_converse, thinking_shown
from metis.testing.emulator.formats.server_converse import (
    citations_block,
    code_blocks,
    server_block_events,
)
from metis.testing.emulator.model import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn
from metis.testing.emulator.rules import Refused, first, table
from metis.testing.emulator.wire import (
    Ids,
    dumps,
    signature,
    split_json,
    split_text,
    text_of,
    verify,
)
from metis.wire.bedrock_converse.rules import turns

SIGNATURE_KIND = "bedrock-reasoning"


def _blocks(message: dict[str, Any]) -> list[tuple[int, str, Any]]:
    return [(j, *next(iter(block.items()))) for j, block in enumerate(message["content"])]


def _check_messages(body: dict[str, Any], call: Any) -> None:
    """Each message's blocks where only one role may send them, and the signatures and server
    tool results this emulator issued."""
    for i, message in enumerate(body["messages"]):
        blocks = _blocks(message)
        _check_blocks(i, message["role"], blocks, call)
        server_rules.converse(i, message["role"], blocks)


def _check_blocks(i: int, role: str, blocks: list[tuple[int, str, Any]], call: Any) -> None:
    strict = call is None or call.env.strict_signatures
    for j, kind, value in blocks:
        where = f"messages.{i}.content.{j}"
        if kind == "toolUse" and (role != "assistant" or not isinstance(value.get("input"), dict)):
            raise Refused(f"{where}.toolUse: an assistant block with an object input")
        if kind == "toolResult" and role != "user" and "type" not in value:
            raise Refused(f"{where}.toolResult: only in user messages")
        if kind == "reasoningContent" and role != "assistant":
            raise Refused(f"{where}.reasoningContent: only in assistant messages")
        reasoning = value.get("reasoningText") if isinstance(value, dict) else None
        if kind == "reasoningContent" and reasoning is not None and strict:
            text, signed = str(reasoning.get("text")), str(reasoning.get("signature"))
            if not verify(SIGNATURE_KIND, text, signed):
                raise Refused(f"{where}.reasoningContent: the reasoning signature is invalid")


RULES = table(
    "converse",
    {
        "strict tools": strict_tools.check_converse,
        "files": files_rules.converse,
        "blocks": _check_messages,
        "turns": first(turns),
        "model settings": check_converse,
    },
)


def converse_prompt(model: str, body: dict[str, Any]) -> Prompt:
    system = "\n".join(
        b["text"] for b in body.get("system") or [] if isinstance(b.get("text"), str)
    )
    config = body.get("toolConfig") or {}
    specs = [t["toolSpec"] for t in config.get("tools") or [] if "toolSpec" in t]
    tools = [ToolSpec(s["name"], s.get("description", ""), s["inputSchema"]["json"]) for s in specs]
    choice = config.get("toolChoice") or {}
    tool = f"tool:{choice['tool'].get('name')}" if "tool" in choice else None
    thinking = (body.get("additionalModelRequestFields") or {}).get("thinking") or {}
    inference = body.get("inferenceConfig") or {}
    return Prompt(
        model=model,
        turns=[_turn(m) for m in body["messages"]],
        system=system,
        tools=tools,
        tool_choice=tool or ("required" if "any" in choice else "auto"),
        thinking=thinking.get("type") in ("enabled", "adaptive"),
        max_tokens=inference.get("maxTokens"),
        stop_sequences=list(inference.get("stopSequences") or ()),
        output_schema=strict_tools.converse_output_schema(body),
        segments=[
            dumps(unmarked(config)).decode() + system,
            *(dumps(unmarked(m)).decode() for m in body["messages"]),
        ],
        breakpoints=converse_breakpoints(body) or None,
        segment_blocks=block_counts(body["messages"]),
        provider="bedrock",
        items=body["messages"],
    )


def _turn(message: dict[str, Any]) -> Turn:
    turn = Turn(role=message["role"])
    texts = []
    for _, kind, value in _blocks(message):
        if kind == "text":
            texts.append(value)
        elif kind in ("toolUse", "toolResult") and "type" in value:
            continue  # a Nova system tool the service ran (server_tool_use): no call of the model's
        elif kind == "toolUse":
            turn.calls.append(CallIn(value["toolUseId"], value.get("name", ""), value["input"]))
        elif kind == "toolResult":
            parts = [p.get("text") or json.dumps(p.get("json")) for p in value["content"]]
            failed = value.get("status") == "error"
            turn.results.append(ResultIn(value["toolUseId"], text_of(parts), None, failed))
    turn.text = "\n".join(texts)
    return turn


def reasoning_shown(model: str, body: dict[str, Any]) -> bool:
    """Whether Claude's reasoning comes back with its text on Converse: as on the Messages API,
    ``thinking.display`` (in ``additionalModelRequestFields``) says, else the model's default
    (``omitted`` from Claude Opus 4.7 on)."""
    fields = body.get("additionalModelRequestFields")
    thinking = fields.get("thinking") if isinstance(fields, dict) else None
    return thinking_shown({"model": model, "thinking": thinking})


def converse_message(
    reply: Reply,
    ids: Ids,
    issued: list[str],
    shown: bool = True,
    documents: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The reply's message (``shown``: its reasoning's text, else its signature alone;
    ``documents``: the citations of the request's documents its text carries)."""
    content: list[dict[str, Any]] = []
    if reply.thinking:
        text = reply.thinking if shown else ""
        sig = signature(SIGNATURE_KIND, text)
        content.append({"reasoningContent": {"reasoningText": {"text": text, "signature": sig}}})
    content += code_blocks(reply, ids, issued)
    if reply.text:
        content += [{"text": reply.text}, *citations_block(reply, documents)]
    for out in reply.calls:
        issued.append(tool_id := "tooluse_" + ids.token(22, "alnum"))
        content.append({"toolUse": {"toolUseId": tool_id, "name": out.name, "input": out.args}})
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


def stream_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """ConverseStream's events for ``message``, in order, with the padding field ``p`` the
    service adds to some of them (as recorded)."""
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant", "p": "abc"})]
    for index, block in enumerate(message["output"]["message"]["content"]):
        deltas: list[dict[str, Any]] = []
        if server := server_block_events(index, block):
            events += server
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]["reasoningText"]
            deltas = [{"reasoningContent": {"text": p}} for p in split_text(reasoning["text"])]
            deltas.append({"reasoningContent": {"signature": reasoning["signature"]}})
        elif "text" in block:
            deltas = [{"text": p} for p in split_text(block["text"])]
        else:
            tool = block["toolUse"]
            start = {"toolUse": {"toolUseId": tool["toolUseId"], "name": tool["name"]}}
            events.append(("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            deltas = [
                {"toolUse": {"input": p}}
                for p in (split_json(dumps(tool["input"]).decode()) if tool["input"] else [])
            ]
        events += [("contentBlockDelta", {"contentBlockIndex": index, "delta": d}) for d in deltas]
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
    stop = {"stopReason": message["stopReason"], "p": "abcdefgh"}
    if "additionalModelResponseFields" in message:
        stop["additionalModelResponseFields"] = message["additionalModelResponseFields"]
    events.append(("messageStop", stop))
    events.append(("metadata", {"usage": message["usage"], "metrics": message["metrics"]}))
    return events
