"""Shared pieces for the reliability tests: recorded streams, a chunk-serving peer, and
event normalization (tool and message ids are fresh ULIDs on every call)."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message, StreamEvent
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.cassette import Cassette

CASSETTES = Path(__file__).parents[1] / "cassettes"
STREAM_TYPES = ("event-stream", "ndjson")


@dataclass
class RecordedStream:
    """One streamed 200 response from a cassette: its provider, body and content type."""

    source: str
    provider: str
    body: bytes
    content_type: str
    model: str

    def __str__(self) -> str:
        return self.source


def cassette_streams() -> list[RecordedStream]:
    found = []
    for path in sorted(CASSETTES.glob("*/*.yaml")):
        cassette = Cassette.load(path)
        for i, interaction in enumerate(cassette.interactions):
            response = interaction.response
            content_type = response.headers.get("content-type", "")
            if response.status != 200 or not any(t in content_type for t in STREAM_TYPES):
                continue
            body = interaction.request.body or {}
            found.append(
                RecordedStream(
                    source=f"{path.parent.name}/{path.name}#{i}",
                    provider=path.parent.name,
                    body=b"".join(response.body_chunks()),
                    content_type=content_type,
                    model=str(body.get("model", "recorded")),
                )
            )
    return found


class ChunkStream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def split_at(body: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points)]


def serving_adapter(
    provider: str,
    chunks: list[bytes] | Callable[[], list[bytes]],
    *,
    status: int = 200,
    content_type: str = "text/event-stream",
    **config: Any,
) -> Adapter:
    """An adapter whose every request is answered with ``chunks`` (no retries by default)."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = chunks() if callable(chunks) else chunks
        return httpx.Response(
            status, headers={"content-type": content_type}, stream=ChunkStream(list(body))
        )

    config.setdefault("api_key", "k")
    config.setdefault("max_retries", 0)
    if provider == "ollama":
        config.setdefault("api_key", None)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return build_adapter(
        provider,
        AdapterConfig(http_client=client, **config),
        tool_id_store=InMemoryToolIdStore(),
    )


def stream_request(provider: str, model: str = "m") -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{provider}:{model}",
        messages=[Message.user("hi")],
        max_output_tokens=1000,
        session_id="reliability",
        stream=True,
    )


_ULID_IDS = re.compile(r"\b(?:tu|msg|req)_[0-9A-HJKMNP-TV-Z]{26}\b")


def normalized(events: list[StreamEvent]) -> list[dict[str, Any]]:
    """``to_dict()`` of each event, with fresh ULID-based ids replaced in order of
    appearance and timing fields dropped."""
    import json

    text = json.dumps([event.to_dict() for event in events], sort_keys=True)
    seen: dict[str, str] = {}

    def swap(match: re.Match[str]) -> str:
        return seen.setdefault(match.group(0), f"<id{len(seen)}>")

    out = json.loads(_ULID_IDS.sub(swap, text))
    for item in out:
        for key in ("latency_ms", "elapsed_ms", "timestamp"):
            item.pop(key, None)
    return out
