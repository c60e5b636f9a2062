"""How a Chat Completions server differs from OpenAI in its reasoning fields and counts (a
stack's ``encode`` settings, beside :class:`~metis.wire.openai_chat.encode.ReasoningReplay`).

- DeepSeek switches reasoning on and off with ``thinking: {type: enabled | disabled}`` and
  takes the level in ``reasoning_effort`` only while it is on (api-docs.deepseek.com "Thinking
  Mode"): ``thinking_switch``.
- xAI's ``completion_tokens`` leaves out ``completion_tokens_details.reasoning_tokens`` where
  OpenAI's includes them (its usage objects: ``total_tokens`` is prompt + completion +
  reasoning): ``reasoning_tokens_apart`` adds them, so ``output_tokens`` is the billed total.
- Text Generation Inference 1.4.0 to 1.4.3 number a stream's one choice by the token's place in
  the stream (``index`` 2, 3, 4, ...; server.rs ``ChatCompletionChunk::new``): ``one_choice``
  reads every chunk's first choice as the reply's. Z.ai's GLM Coding Plan endpoint numbers it
  by the part of the reply it carries (reasoning 0, text 1, tool calls 2): ``zai`` sets it too.
- Text Generation Inference 1.4.0 to 2.0.1 stream the end-of-sequence token's own text (``</s>``)
  as the content of the chunk that ends with ``eos_token`` (server.rs leaves a special token's
  text out from 2.0.2): ``end_token_text`` leaves that content out.
- Text Generation Inference 1.4.3 to 3.1 stream a tool call as its grammar's JSON, naming no
  function: ``grammar_tool_calls`` reads it when the reply ends
  (:mod:`metis.wire.openai_chat.grammar_calls`).
- Text Generation Inference 2.0.1 to 2.3.1 answer with a call of the grammar's own
  ``notify_error`` tool when the model calls none of the request's: ``notify_error_text`` reads
  its ``error`` as the reply's text, whole and streamed, as TGI means it
  (:func:`~metis.wire.openai_chat.grammar_calls.notified_error`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.model.request import ThinkingConfig
from metis.wire.knobs.forms import effort_of


class ChatQuirks(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    thinking_switch: bool = False
    reasoning_tokens_apart: bool = False
    one_choice: bool = False
    end_token_text: bool = False
    grammar_tool_calls: bool = False
    notify_error_text: bool = False


NAMES = frozenset(ChatQuirks.model_fields)
NO_QUIRKS = ChatQuirks()


def reasoning_fields(thinking: ThinkingConfig, quirks: ChatQuirks) -> dict[str, Any]:
    """The body's reasoning fields for ``thinking`` (already fitted to the model)."""
    effort = effort_of(thinking)
    if not quirks.thinking_switch:
        return {"reasoning_effort": effort}
    if effort == "none":
        return {"thinking": {"type": "disabled"}}
    return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}
