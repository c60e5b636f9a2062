"""Files in a conversation: documents, audio and video (docs/contract.md §9).

A file is given one of four ways, its ``source``: inline base64 data with its media type, a URL
the provider fetches, inline text (documents only), or the id a provider's Files API issued.
A file id is provider state, like a thinking signature: it names a file in one provider's store,
so it goes only to the provider that issued it (``FileIdSource.provider``) and is refused (in
the turn being sent) or dropped with the lossy-projection WARN (in an older turn) anywhere else.

::

    DocumentBlock.from_path("report.pdf")             # base64, media type from the name
    DocumentBlock.from_url("https://example.com/paper.pdf")
    DocumentBlock.from_text("Q3 revenue was ...", title="Q3 notes")
    DocumentBlock.from_file_id("file_011CNha8iCJcU1wXNR6q4V8w", provider="anthropic")
    AudioBlock.from_path("question.wav")
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from metis.model.base import Canonical
from metis.model.block import BlockBase


class _Source(Canonical):
    """Where a file block's bytes are."""


class Base64Source(_Source):
    """A file given inline: its media type (``application/pdf``) and its bytes in base64."""

    type: Literal["base64"] = "base64"
    media_type: str = Field(pattern=r"^[\w.+-]+/[\w.+-]+$")
    data: str = Field(min_length=1)

    @model_validator(mode="after")
    def _not_a_data_url(self) -> Self:
        if self.data.startswith("data:"):
            raise ValueError(
                "data: give the base64 data alone, without the 'data:...;base64,' prefix "
                "(the media type goes in media_type)"
            )
        return self

    def byte_size(self) -> int:
        """The size of the decoded file, from the length of its base64."""
        padding = len(self.data) - len(self.data.rstrip("="))
        return len(self.data) * 3 // 4 - padding

    def decoded_text(self) -> str | None:
        """The file as UTF-8 text, or None when it is not valid base64 of UTF-8 text."""
        try:
            return base64.b64decode(self.data, validate=True).decode("utf-8")
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            return None


class URLSource(_Source):
    """A file the provider fetches from a URL (``https://``, or a ``gs://`` URI on Vertex)."""

    type: Literal["url"] = "url"
    url: str = Field(min_length=1)
    media_type: str | None = None
    """Where the URL does not say it by its extension (a YouTube link has none)."""


class TextSource(_Source):
    """A document given as its text."""

    type: Literal["text"] = "text"
    text: str
    media_type: str = Field(default="text/plain", pattern=r"^text/[\w.+-]+$")

    def as_base64(self) -> Base64Source:
        """The same document as base64 data of its UTF-8 text, for a wire that takes no text."""
        data = base64.b64encode(self.text.encode("utf-8")).decode("ascii")
        return Base64Source(media_type=self.media_type, data=data)


class FileIdSource(_Source):
    """A file already in a provider's store: the id its Files API issued (Anthropic
    ``file_...``, OpenAI ``file-...``, a Gemini ``files/...`` URI, an ``s3://`` URI on Bedrock)
    and the provider (metis stack name) that issued it, the only one it is sent to."""

    type: Literal["file"] = "file"
    file_id: str = Field(min_length=1)
    provider: str = Field(min_length=1)
    media_type: str | None = None


FileSource = Annotated[
    Base64Source | URLSource | TextSource | FileIdSource, Field(discriminator="type")
]


_HOME = {"image/": "an ImageBlock", "audio/": "an AudioBlock", "video/": "a VideoBlock"}
"""Where a media type that is not a document's belongs."""


class FileBlock(BlockBase):
    """What documents, audio and video have in common: a source, and a media type."""

    source: FileSource
    _kinds: ClassVar[tuple[str, ...]] = ()
    """The media type prefixes this kind of block takes (``audio/``); empty: any other."""

    @model_validator(mode="after")
    def _fits_kind(self) -> Self:
        media_type = self.media_type()
        kind = str(type(self).model_fields["type"].default)
        a_kind = f"{'an' if kind == 'audio' else 'a'} {kind} block"
        if isinstance(self.source, TextSource) and kind != "document":
            raise ValueError(f"source: {a_kind} cannot be given as text")
        if media_type is None:
            return self
        major = media_type.split("/", 1)[0] + "/"
        if self._kinds and major not in self._kinds:
            raise ValueError(f"source.media_type: {a_kind} takes {self._kinds[0]}* types")
        if not self._kinds and major in _HOME:
            raise ValueError(f"source.media_type: {media_type} goes in {_HOME[major]}")
        return self

    def media_type(self) -> str | None:
        """The file's media type: its source's, or guessed from the extension of a URL or a
        file id (``s3://bucket/lease.pdf``)."""
        source = self.source
        if isinstance(source, Base64Source | TextSource) or source.media_type:
            return source.media_type
        name = source.url if isinstance(source, URLSource) else source.file_id
        return mimetypes.guess_type(urlsplit(name).path)[0]

    def byte_size(self) -> int | None:
        """The file's size in bytes where it is inline; None for URLs and file ids."""
        if isinstance(self.source, Base64Source):
            return self.source.byte_size()
        if isinstance(self.source, TextSource):
            return len(self.source.text.encode("utf-8"))
        return None

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str, **fields: Any) -> Self:
        """A block holding ``data`` inline, as base64."""
        encoded = base64.b64encode(data).decode("ascii")
        return cls(source=Base64Source(media_type=media_type, data=encoded), **fields)

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None, **fields: Any) -> Self:
        """A block holding the file at ``path`` inline; its media type from its name unless
        given (a document is titled with the file's name unless ``title`` is given)."""
        path = Path(path)
        media_type = media_type or mimetypes.guess_type(path.name)[0]
        if media_type is None:
            raise ValueError(f"{path.name}: cannot tell its media type; pass media_type=")
        if "title" in cls.model_fields:
            fields.setdefault("title", path.name)
        return cls.from_bytes(path.read_bytes(), media_type, **fields)

    @classmethod
    def from_url(cls, url: str, media_type: str | None = None, **fields: Any) -> Self:
        """A block the provider fetches from ``url``."""
        return cls(source=URLSource(url=a_url(url, cls.__name__), media_type=media_type), **fields)

    @classmethod
    def from_file_id(
        cls, file_id: str, *, provider: str, media_type: str | None = None, **fields: Any
    ) -> Self:
        """A block naming a file in ``provider``'s store (sent to that provider only)."""
        source = FileIdSource(file_id=file_id, provider=provider, media_type=media_type)
        return cls(source=source, **fields)


def a_url(url: str, block: str) -> str:
    """``url``, or a ValueError when it has no scheme: a local file's path, most often."""
    if isinstance(url, str) and len(urlsplit(url).scheme) > 1:
        return url
    raise ValueError(
        f"{block}.from_url({url!r}): not a URL (no scheme, as https://); a local file is "
        f"{block}.from_path(path)"
    )


class DocumentBlock(FileBlock):
    """A document: a PDF, plain text, or another type the provider reads (Word, spreadsheets,
    HTML, Markdown, ...). ``title`` and ``context`` are shown to the model with it (Anthropic
    takes both; elsewhere the title names the file and the context is a text part before it);
    ``citations`` asks the provider to cite it where it can (Anthropic, Bedrock)."""

    type: Literal["document"] = "document"
    title: str | None = None
    context: str | None = None
    citations: bool = False

    @classmethod
    def from_text(cls, text: str, media_type: str = "text/plain", **fields: Any) -> Self:
        """A document given as its text."""
        return cls(source=TextSource(text=text, media_type=media_type), **fields)


class AudioBlock(FileBlock):
    """Audio input: a recording the model listens to (``audio/wav``, ``audio/mpeg``, ...)."""

    type: Literal["audio"] = "audio"
    _kinds: ClassVar[tuple[str, ...]] = ("audio/",)


class VideoBlock(FileBlock):
    """Video input (``video/mp4``, ..., or a YouTube URL on Gemini)."""

    type: Literal["video"] = "video"
    _kinds: ClassVar[tuple[str, ...]] = ("video/",)


MediaBlock = DocumentBlock | AudioBlock | VideoBlock
"""A file block of any kind."""
