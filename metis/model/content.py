"""Canonical messages and content blocks (docs/contract.md §3).

Every block may carry ``provider_raw``: the provider's own form of the block, tagged with the
provider and model that produced it, so that what the canonical model cannot hold (a thinking
signature's exact bytes, an unparseable tool-argument string) survives a round trip back to the
same provider and is never sent anywhere else.
"""

from __future__ import annotations

import base64
import mimetypes
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from metis.core.empty import empty_dict
from metis.model.base import Canonical
from metis.model.block import BlockBase
from metis.model.block import ProviderRaw as ProviderRaw
from metis.model.cache import CacheHint
from metis.model.citation import Citation
from metis.model.media import AudioBlock as AudioBlock
from metis.model.media import DocumentBlock as DocumentBlock
from metis.model.media import FileIdSource, a_url
from metis.model.media import VideoBlock as VideoBlock
from metis.model.server_tools import ServerToolCallBlock as ServerToolCallBlock
from metis.model.server_tools import ServerToolResultBlock as ServerToolResultBlock


class Role(StrEnum):
    """Who speaks a message: ``system``, ``user``, ``assistant``, or ``tool`` (tool results)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class TextBlock(BlockBase):
    """Text in a message or reply; ``citations`` are the sources a reply's text cites
    (docs/contract.md §12)."""

    type: Literal["text"] = "text"
    text: str
    citations: list[Citation] | None = None

    @model_serializer(mode="wrap")
    def _citations_only_when_given(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.citations is None and isinstance(data, dict):
            data.pop("citations", None)  # a block without citations dumps as it always did
        return data


class Base64ImageSource(Canonical):
    """An image given inline: its media type (``image/png``) and base64 data."""

    type: Literal["base64"] = "base64"
    media_type: str
    data: str


class URLImageSource(Canonical):
    """An image given by URL."""

    type: Literal["url"] = "url"
    url: str


ImageSource = Annotated[
    Base64ImageSource | URLImageSource | FileIdSource, Field(discriminator="type")
]
"""An image's source: inline, by URL, or by the id a provider's Files API issued (sent to that
provider only, as a document's file id is: docs/contract.md §9)."""


class ImageBlock(BlockBase):
    """An image in a message, from base64 data, a URL or a provider's file id:
    ``ImageBlock.from_path("chart.png")``, ``from_bytes(data, "image/png")``, ``from_url(url)``,
    ``from_file_id("file_011...", provider="anthropic")``."""

    type: Literal["image"] = "image"
    source: ImageSource

    def media_type(self) -> str | None:
        """The image's media type: its source's, or guessed from the extension of its URL or
        file id; None when neither says."""
        source = self.source
        if isinstance(source, Base64ImageSource):
            return source.media_type
        if isinstance(source, FileIdSource) and source.media_type:
            return source.media_type
        name = source.url if isinstance(source, URLImageSource) else source.file_id
        return mimetypes.guess_type(urlsplit(name).path)[0]

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str, **fields: Any) -> ImageBlock:
        """An image holding ``data`` inline, as base64."""
        encoded = base64.b64encode(data).decode("ascii")
        return cls(source=Base64ImageSource(media_type=media_type, data=encoded), **fields)

    @classmethod
    def from_path(
        cls, path: str | Path, media_type: str | None = None, **fields: Any
    ) -> ImageBlock:
        """The image file at ``path``, inline; its media type from its name unless given."""
        path = Path(path)
        media_type = media_type or mimetypes.guess_type(path.name)[0]
        if media_type is None or not media_type.startswith("image/"):
            raise ValueError(
                f"{path.name}: not an image by its name ({media_type or 'unknown type'}); "
                "pass media_type= (a PDF or other file is a DocumentBlock)"
            )
        return cls.from_bytes(path.read_bytes(), media_type, **fields)

    @classmethod
    def from_url(cls, url: str, **fields: Any) -> ImageBlock:
        """An image the provider fetches from ``url``."""
        return cls(source=URLImageSource(url=a_url(url, "ImageBlock")), **fields)

    @classmethod
    def from_file_id(
        cls, file_id: str, *, provider: str, media_type: str | None = None, **fields: Any
    ) -> ImageBlock:
        """An image naming a file in ``provider``'s store (sent to that provider only)."""
        if media_type is not None and not media_type.startswith("image/"):
            raise ValueError(f"{media_type}: not an image type (a file is a DocumentBlock)")
        source = FileIdSource(file_id=file_id, provider=provider, media_type=media_type)
        return cls(source=source, **fields)


class ToolUseBlock(BlockBase):
    """A tool call the model made: its canonical id (``tu_<ulid>``), the tool's name and its
    input; ``input_error`` says why, when the arguments were not a JSON object."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=empty_dict)
    input_error: str | None = None
    """Set when the model's arguments were not a JSON object (malformed, or cut off): ``input``
    is then only what parsed of them, the text as written is in ``provider_raw.data
    ["arguments"]``, and the call is best answered with an ``is_error`` tool result."""


ToolResultContent = Annotated[
    TextBlock | ImageBlock | DocumentBlock | AudioBlock | VideoBlock, Field(discriminator="type")
]


EMPTY_ERROR_RESULT = "(the tool failed without output)"
"""The words an error tool result with no output is sent with: some providers refuse it empty."""


class ToolResultBlock(BlockBase):
    """The answer to a tool call: the canonical id of the call it answers, its content
    (text, or text with images, documents, audio or video), and ``is_error`` when the tool
    failed."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[ToolResultContent] = ""
    is_error: bool = False

    @property
    def text(self) -> str:
        """The result's text parts, one per line; images and files are not text and are left
        out."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content if isinstance(part, TextBlock))


class ThinkingBlock(BlockBase):
    """A model's reasoning, with the provider's ``signature`` where it signs it; it goes back
    only to the provider, platform and model that produced it (docs/contract.md §7)."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(BlockBase):
    """Reasoning the provider keeps encrypted: opaque ``data`` that goes back only to the
    provider and model that produced it (docs/contract.md §7)."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class OpaqueBlock(BlockBase):
    """A block a provider returned that has no canonical meaning (a compaction item, an MCP
    call, a tool-search result, whatever arrives next), kept so that nothing is silently lost:
    ``kind`` is the provider's own type, ``provider_raw`` who made it and the block exactly as
    the provider gave it (``data["item"]``). It goes back only to that provider; anywhere else
    it is dropped with one WARN (docs/contract.md §8)."""

    type: Literal["opaque"] = "opaque"
    kind: str
    provider_raw: ProviderRaw


ContentBlock = Annotated[
    TextBlock
    | ImageBlock
    | DocumentBlock
    | AudioBlock
    | VideoBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ServerToolCallBlock
    | ServerToolResultBlock
    | OpaqueBlock,
    Field(discriminator="type"),
]


class Message(Canonical):
    """One turn of the conversation. ``content`` accepts a plain string for convenience."""

    role: Role
    content: list[ContentBlock]
    id: str | None = None
    cache: CacheHint | None = Field(default=None, exclude_if=lambda hint: hint is None)
    """Cache the prompt up to and including this message (docs/caching.md)."""

    @field_validator("content", mode="before")
    @classmethod
    def _text_shorthand(cls, value: Any) -> Any:
        return [TextBlock(text=value)] if isinstance(value, str) else value

    @property
    def text(self) -> str:
        """The message's text blocks, joined; other blocks are not text and are left out."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def thinking(self) -> str:
        """The reasoning the message shows (its thinking blocks, joined), as a reply's."""
        return "\n\n".join(b.thinking for b in self.content if isinstance(b, ThinkingBlock))

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        """The tool calls the message makes, in order, as a reply's."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message of ``text`` (or give ``system=`` to a call or session)."""
        return cls(role=Role.SYSTEM, content=[TextBlock(text=text)])

    @classmethod
    def user(cls, *content: str | ContentBlock) -> Message:
        """A user message of these parts in order: strings are text, blocks as they are
        (``Message.user("What is in it?", ImageBlock.from_path("chart.png"))``)."""
        return cls(role=Role.USER, content=_blocks(content))

    @classmethod
    def assistant(cls, *content: str | ContentBlock) -> Message:
        """An assistant message of these parts (a reply written into a history by hand; a
        reply's own is ``reply.message``)."""
        return cls(role=Role.ASSISTANT, content=_blocks(content))

    @classmethod
    def tool(cls, *results: ToolResultBlock) -> Message:
        """The answers to a reply's tool calls, one ``ToolResultBlock`` per call
        (``metis.run_tools(reply, tools)`` makes it from your functions)."""
        for position, item in enumerate(results):
            if not isinstance(item, ToolResultBlock | dict):
                raise TypeError(
                    f"results[{position}] is {type(item).__name__}, not a ToolResultBlock: a "
                    "call's answer is ToolResultBlock(tool_use_id=call.id, content=...)"
                )
        return cls(role=Role.TOOL, content=list(results))


def _blocks(items: tuple[str | ContentBlock, ...]) -> list[ContentBlock]:
    for position, item in enumerate(items):
        if not isinstance(item, str | BlockBase | dict):
            raise TypeError(_not_a_block(position, item))  # as a constructor does
    return [TextBlock(text=item) if isinstance(item, str) else item for item in items]


def _not_a_block(position: int, item: object) -> str:
    """What an item of ``Message.user(...)`` that is no block is, and what would do."""
    said = f"content[{position}] is {type(item).__name__}, not text or a content block"
    if isinstance(item, bytes | bytearray | Path):
        file = "ImageBlock.from_bytes(data, media_type), from_path(path), or DocumentBlock's"
        return f"{said}: a file is {file}"
    return f"{said}: give a str, or a block (TextBlock, ImageBlock, DocumentBlock, ...)"
