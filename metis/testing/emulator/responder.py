"""The built-in scripted model: deterministic, provider-neutral, a little clever. The rules, in
order:

1. the last turn carries tool results -> a text answer that uses them (JSON that fits a
   requested output schema, filled from the message and the results);
2. a tool offered in the request fits the last user message (its name or description shares a
   word with the message, the message names it, or asks to "use the tool"), or the request
   forces a tool -> call it, arguments filled from the message (proper nouns for names and
   places, numbers, enum values it mentions, the message itself for queries) or by type; one
   call per named thing when the message names several (``Paris and Rome``) and the tool takes
   one at a time;
3. otherwise -> ``You said: <the message>`` (or JSON that fits a requested output schema).

The message is the last user text without ``<system-reminder>`` blocks. Thinking, when the
request asks for it, comes first and says which rule applied.
"""

from __future__ import annotations

import json
import re
from typing import Any

from metis.testing.emulator.model import CallOut, Prompt, Reply, ResultIn, ToolSpec, Turn
from metis.testing.emulator.words import (
    Filler,
    entity_property,
    first_option,
    inlined,
    schema_type,
    words,
)


class Responder:
    """The default model of every endpoint; ``tool_preamble`` makes it say a sentence before
    its tool calls."""

    def __init__(self, *, tool_preamble: bool = False) -> None:
        self.tool_preamble = tool_preamble

    def __call__(self, prompt: Prompt) -> Reply:
        # A user turn of attachments only (the images and files of the tool results before
        # it, where a tool message holds text only) says nothing of its own.
        said = [t for t in prompt.turns if t.role != "user" or t.text or t.results]
        last = said[-1] if said else Turn(role="user")
        message = prompt.user_text
        forced = prompt.tool_choice not in ("auto", "none") and bool(prompt.tools)
        answering = last.role == "user" and bool(last.results) and not forced
        reply = Reply()
        calls = [] if answering else self._choose_calls(prompt, message)
        if answering:
            reply.text = _answer_from_results(last.results, prompt.turns)
            plan = "The tool results are in; I will answer with them."
            if prompt.output_schema is not None or prompt.json_mode:  # as JSON, filled from both
                reply.text = _structured(f"{message} {reply.text}", prompt.output_schema)
                plan = "The tool results are in; I will answer with JSON that fits the schema."
        elif calls:
            reply.calls = calls
            plan = "I should call " + ", ".join(f"{c.name}({c.arguments})" for c in calls) + "."
            reply.text = f"Let me check that with {calls[0].name}." if self.tool_preamble else ""
        elif prompt.output_schema is not None or prompt.json_mode:
            reply.text, plan = (
                _structured(message, prompt.output_schema),
                "I will answer with JSON that fits the requested schema.",
            )
        else:
            reply.text = f"You said: {message}" if message else "Hello! How can I help?"
            plan = "I will answer directly."
        if prompt.thinking:
            reply.thinking = (
                f"The user wrote: {' '.join(message.split()[:12]) or '(nothing)'}. {plan}"
            )
        return reply

    def _choose_calls(self, prompt: Prompt, message: str) -> list[CallOut]:
        choice, tools = prompt.tool_choice, prompt.tools
        if choice == "none" or not tools:
            return []
        if choice.startswith("tool:"):
            tool = next((t for t in tools if t.name == choice[5:]), None)
            return _calls_for(tool, message, prompt.parallel) if tool else []
        best = _best_tool(tools, message, prompt.system)
        if best is None and (
            choice == "required" or re.search(r"\b(tools?|functions?)\b", message, re.I)
        ):
            called = {c.name for t in prompt.turns for c in t.calls}
            best = next((t for t in tools if t.name not in called), tools[0])
        return _calls_for(best, message, prompt.parallel) if best else []


def _calls_for(tool: ToolSpec, message: str, parallel: bool) -> list[CallOut]:
    raw = tool.schema if isinstance(tool.schema, dict) else {}
    schema = inlined(raw, raw)
    filler = Filler(message, schema)
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    takes_many = any(
        schema_type(first_option(p)) == "array" for p in props.values() if isinstance(p, dict)
    )
    if entity_property(schema) and parallel and len(filler.nouns) > 1 and not takes_many:
        return [
            CallOut(tool.name, Filler(message, schema).object(schema, entity=noun))
            for noun in filler.nouns[:4]
        ]
    return [CallOut(tool.name, filler.object(schema))]


def _best_tool(tools: list[ToolSpec], message: str, system: str) -> ToolSpec | None:
    said, lowered = set(words(message)), message.lower()
    best: tuple[int, int] = (0, 0)
    chosen: ToolSpec | None = None
    for index, tool in enumerate(tools):
        score = 5 if tool.name.lower() in lowered else 0
        score += 2 * len(said & set(words(tool.name.replace("_", " ").replace("-", " "))))
        score += len(said & set(words(tool.description)))
        if score and (score, -index) > best:
            best, chosen = (score, -index), tool
    if chosen is None and system and words(message):
        chosen = next((t for t in tools if t.name and t.name in system), None)
    return chosen


def _answer_from_results(results: list[ResultIn], turns: list[Turn]) -> str:
    names = {c.id: c.name for t in turns for c in t.calls}
    sentences = []
    for result in results:
        name = result.name or names.get(result.call_id, "the tool")
        content = " ".join(result.content.split())
        content = content[:297] + "..." if len(content) > 300 else content
        sentence = (
            f"{name} failed: {content or 'no details'}"
            if result.is_error
            else f"According to {name}: {content or '(empty)'}"
        )
        sentences.append(sentence if sentence.endswith((".", "!", "?")) else sentence + ".")
    return " ".join(sentences) or "The tool returned nothing."


def _structured(message: str, schema: dict[str, Any] | None) -> str:
    if not schema:
        return json.dumps({"answer": f"You said: {message}"}, ensure_ascii=False)
    schema = inlined(schema, schema)
    filler = Filler(message, schema)
    value = (
        filler.object(schema, every=True)
        if schema_type(schema) == "object"
        else filler.value("answer", schema)
    )
    return json.dumps(value, ensure_ascii=False)
