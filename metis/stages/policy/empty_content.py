"""empty_content: empty user text and empty error results, the same on every stack.

Providers disagree on emptiness: Anthropic refuses empty or whitespace-only text blocks and an
error ``tool_result`` without content, OpenAI Chat refuses a user message with empty content,
Gemini an empty text part, while the Responses API takes ``input_text: ""``. So before any codec
sees the request: a user or tool message's empty text blocks are left out (nothing is lost);
a user message left with nothing to send is refused with one InvalidRequestError naming it;
an error tool result with no output says so in words, :data:`EMPTY_ERROR_RESULT`.
"""

from __future__ import annotations

from metis.errors import InvalidRequestError
from metis.model.content import (
    EMPTY_ERROR_RESULT,
    ContentBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
)
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage

__all__ = ["EMPTY_ERROR_RESULT", "EmptyContent"]


class EmptyContent(RequestStage[CanonicalRequest]):
    name = "empty_content"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        messages = request.messages
        care = [i for i in call.history(messages).blank_at if _needs_care(messages[i])]
        if not care:
            return request
        messages = list(messages)
        for i in care:
            messages[i] = _cleaned(messages[i])
        empty = [
            message.id or f"messages[{i}]"
            for i, message in enumerate(messages)
            if message.role is Role.USER and not message.content
        ]
        if empty:
            raise InvalidRequestError(
                f"{', '.join(empty)}: a user message has nothing to send (its text is empty)",
                provider=call.provider,
                request_id=call.request_id,
                retryable=False,
            )
        return request.model_copy(update={"messages": messages})


def _needs_care(message: Message) -> bool:
    return message.role in (Role.USER, Role.TOOL)


def _cleaned(message: Message) -> Message:
    content: list[ContentBlock] = []
    for block in message.content:
        if _empty_text(block):
            continue
        if isinstance(block, ToolResultBlock) and _silent_error(block):
            block = block.model_copy(update={"content": EMPTY_ERROR_RESULT})
        content.append(block)
    return message.model_copy(update={"content": content})


def _empty_text(block: ContentBlock) -> bool:
    return isinstance(block, TextBlock) and not block.text.strip()


def _silent_error(block: ContentBlock) -> bool:
    """An error result with no output: no text, no image."""
    if not isinstance(block, ToolResultBlock) or not block.is_error:
        return False
    if isinstance(block.content, str):
        return not block.content.strip()
    return all(isinstance(p, TextBlock) and not p.text.strip() for p in block.content)
