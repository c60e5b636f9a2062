"""The part of :class:`~metis.wire.builder.MessageBuilder` for what arrives whole or annotates
text: a server tool's call or result (docs/contract.md §11), an image the model made, and a
citation (§12)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from metis.model.citation import Citation
from metis.model.content import (
    ImageBlock,
    ProviderRaw,
    ServerToolCallBlock,
    ServerToolResultBlock,
)
from metis.model.events import CitationDelta, ServerToolCall, ServerToolResult, StreamEvent
from metis.wire.blocks import TEXT, WHOLE, Block
from metis.wire.unicode_text import clean_model, clean_value


class WholeBlocks:
    provider: str
    model: str
    _blocks: list[Block]
    _by_key: dict[Hashable, Block]
    _events: list[StreamEvent]

    def _open(self, key: Hashable, kind: str) -> Block:
        raise NotImplementedError  # the builder's own

    def citation(self, key: Hashable, citation: Citation) -> None:
        """A source the text block under ``key`` cites (a new block unless it is the latest)."""
        block = self._by_key.get(key)
        if block is None or block.kind != TEXT or block.index != len(self._blocks) - 1:
            block = self._open(key, TEXT)
        citation = clean_model(citation)
        if citation.provider_raw is not None:
            citation = citation.model_copy(
                update={"provider_raw": self._own(citation.provider_raw)}
            )
        block.citations.append(citation)
        self._events.append(CitationDelta(block.index, citation))

    def server_tool(
        self, key: Hashable, block: ServerToolCallBlock | ServerToolResultBlock
    ) -> None:
        """A server tool's call or result, whole; its ``provider_raw`` made this reply's own."""
        record = self._open(key, WHOLE)
        record.ended = True
        block = clean_model(block)
        raw = block.provider_raw or ProviderRaw(provider=self.provider)
        record.whole = whole = block.model_copy(update={"provider_raw": self._own(raw)})
        if isinstance(whole, ServerToolCallBlock):
            self._events.append(ServerToolCall(record.index, whole))
        else:
            self._events.append(ServerToolResult(record.index, whole))

    def image(self, key: Hashable, block: ImageBlock, raw: dict[str, Any]) -> None:
        """An image the model made, whole: no event (as an opaque block, it is in
        ``final_content`` at its place), ``raw`` (the provider's fields for the way back, a
        thought signature) in its ``provider_raw``, which marks it as this reply's own."""
        record = self._open(key, WHOLE)
        record.ended = True
        own = ProviderRaw(provider=self.provider, model=self.model, data=clean_value(raw))
        record.whole = clean_model(block).model_copy(update={"provider_raw": own})

    def text_of(self, key: Hashable) -> str:
        """The text so far of the text block under ``key`` ("" if there is none)."""
        block = self._by_key.get(key)
        return "".join(block.parts) if block is not None and block.kind == TEXT else ""

    def _own(self, raw: ProviderRaw) -> ProviderRaw:
        data = clean_value(raw.data)
        return ProviderRaw(provider=self.provider, model=self.model, data=data)
