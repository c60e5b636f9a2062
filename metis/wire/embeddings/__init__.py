"""The embedding wire formats, sans-IO, one codec each (docs/embeddings.md): an embedding
stack names its codec once (``codec: openai``)."""

from __future__ import annotations

from metis.errors import StackError
from metis.wire.embeddings.base import EmbedBatch, EmbedCodec, Embedded
from metis.wire.embeddings.bedrock import BedrockEmbeddings
from metis.wire.embeddings.cohere import CohereEmbeddings
from metis.wire.embeddings.google import GeminiEmbeddings, VertexEmbeddings
from metis.wire.embeddings.ollama import OllamaEmbeddings
from metis.wire.embeddings.openai import MistralEmbeddings, OpenAIEmbeddings, VoyageEmbeddings

__all__ = ["CODECS", "EmbedBatch", "EmbedCodec", "Embedded", "embedding_codec"]

CODECS: dict[str, type[EmbedCodec]] = {
    codec.name: codec
    for codec in (
        OpenAIEmbeddings,
        MistralEmbeddings,
        VoyageEmbeddings,
        CohereEmbeddings,
        GeminiEmbeddings,
        VertexEmbeddings,
        BedrockEmbeddings,
        OllamaEmbeddings,
    )
}


def embedding_codec(name: str) -> EmbedCodec:
    """The codec registered as ``name``; a StackError listing the names when there is none."""
    found = CODECS.get(name)
    if found is None:
        raise StackError(
            f"no embedding codec named {name!r} (embedding codecs: {', '.join(sorted(CODECS))})"
        )
    return found()
