"""Pre-flight token estimates, with no tokenizer and no network (seed 000 §3.1).

About four characters of English or JSON per token, plus a small fixed cost per message and
per tool, and a flat cost per image. Good enough to route on and to refuse a request that
cannot fit; never used for billing.
"""

from __future__ import annotations

import json

from metis.model.content import (
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.request import ToolDefinition

CHARS_PER_TOKEN = 4.0
PER_MESSAGE = 4
PER_TOOL = 8
PER_IMAGE = 1_600


def estimate_input_tokens(
    messages: list[Message], tools: list[ToolDefinition], system_prompt: str | None
) -> int:
    chars = len(system_prompt or "")
    images = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ThinkingBlock):
                chars += len(block.thinking)
            elif isinstance(block, RedactedThinkingBlock):
                chars += len(block.data) // 2
            elif isinstance(block, ToolUseBlock):
                chars += len(block.name) + len(json.dumps(block.input))
            elif isinstance(block, ToolResultBlock):
                if isinstance(block.content, str):
                    chars += len(block.content)
                else:
                    for part in block.content:
                        if isinstance(part, TextBlock):
                            chars += len(part.text)
                        else:
                            images += 1
            elif isinstance(block, ImageBlock):
                images += 1
    for tool in tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.input_schema))
    overhead = PER_MESSAGE * len(messages) + PER_TOOL * len(tools) + PER_IMAGE * images
    return int(chars / CHARS_PER_TOKEN) + overhead
