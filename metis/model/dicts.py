"""The canonical shapes as TypedDicts: messages written as plain dicts, checked by mypy.

::

    history: list[MessageDict] = [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                      "content": "18 C"}]},
    ]
    metis.complete(model, history)          # validated into Message objects on the way in
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class TextBlockDict(TypedDict):
    type: Literal["text"]
    text: str


class Base64SourceDict(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class URLSourceDict(TypedDict):
    type: Literal["url"]
    url: str


class ImageBlockDict(TypedDict):
    type: Literal["image"]
    source: Base64SourceDict | URLSourceDict | FileIdSourceDict


class TextSourceDict(TypedDict):
    type: Literal["text"]
    text: str
    media_type: NotRequired[str]


class FileURLSourceDict(TypedDict):
    type: Literal["url"]
    url: str
    media_type: NotRequired[str | None]


class FileIdSourceDict(TypedDict):
    type: Literal["file"]
    file_id: str
    provider: str
    media_type: NotRequired[str | None]


FileSourceDict = Base64SourceDict | FileURLSourceDict | TextSourceDict | FileIdSourceDict


class DocumentBlockDict(TypedDict):
    """``{"type": "document", "source": {"type": "url", "url": "https://.../paper.pdf"}}``"""

    type: Literal["document"]
    source: FileSourceDict
    title: NotRequired[str | None]
    context: NotRequired[str | None]
    citations: NotRequired[bool]


class AudioBlockDict(TypedDict):
    type: Literal["audio"]
    source: Base64SourceDict | FileURLSourceDict | FileIdSourceDict


class VideoBlockDict(TypedDict):
    type: Literal["video"]
    source: Base64SourceDict | FileURLSourceDict | FileIdSourceDict


MediaBlockDict = DocumentBlockDict | AudioBlockDict | VideoBlockDict


class ToolUseBlockDict(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: NotRequired[dict[str, Any]]


class ToolResultBlockDict(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: NotRequired[str | list[TextBlockDict | ImageBlockDict | MediaBlockDict]]
    is_error: NotRequired[bool]


class ThinkingBlockDict(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str | None]


class RedactedThinkingBlockDict(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


class ProviderRawDict(TypedDict):
    provider: str
    model: NotRequired[str | None]
    data: NotRequired[dict[str, Any]]


class OpaqueBlockDict(TypedDict):
    type: Literal["opaque"]
    kind: str
    provider_raw: ProviderRawDict


ContentBlockDict = (
    TextBlockDict
    | ImageBlockDict
    | DocumentBlockDict
    | AudioBlockDict
    | VideoBlockDict
    | ToolUseBlockDict
    | ToolResultBlockDict
    | ThinkingBlockDict
    | RedactedThinkingBlockDict
    | OpaqueBlockDict
)


class MessageDict(TypedDict):
    """A :class:`metis.model.Message` as a dict; ``content`` may be a plain string."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentBlockDict]
    id: NotRequired[str | None]
