"""Recorded replies with one string of their JSON made a lone UTF-16 surrogate, replayed
through the full adapters (tests/conformance/test_lone_surrogates.py).

A JSON ``"\\ud800"`` escape decodes to a ``str`` that no UTF-8 can hold. Whatever string of a
provider's reply carries one (a value, or a key), the call must give events, a final message
and an error that encode as UTF-8 JSON, and any error must be classified (an AdapterError).

Each recorded body is cut into pieces: bytes kept as they are, and JSON payloads (an SSE
``data:`` line, an NDJSON line, a whole JSON body, an AWS event-stream frame's payload). A
:class:`Spot` is one string (or key) of one payload; :func:`mutated` writes the body with that
string replaced by a lone surrogate.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from metis import AdapterConfig, build_adapter
from metis.errors import AdapterError
from metis.model import CanonicalRequest, Message
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.cassette import Cassette
from metis.wire.framing.aws_eventstream import EventStreamDecoder, encode_frame

from ..recordings import Exchange
from . import test_real_traffic as real

CASSETTES = Path(__file__).parents[2] / "cassettes"
LONE = ("\ud83d", "\udc00")  # a high half and a low half, each alone
Replayed = tuple[list[Any], Any]
"""A replay's events (streamed) and reply (not streamed)."""


# Bodies cut into payloads ------------------------------------------------------------------


@dataclass
class Piece:
    """Bytes kept as they are (``data`` None), or a JSON payload between ``head`` and ``tail``."""

    head: bytes
    data: Any = None
    tail: bytes = b""
    frame_headers: dict[str, str] | None = None  # an event-stream frame's headers


def pieces(body: bytes, content_type: str) -> list[Piece]:
    if "vnd.amazon.eventstream" in content_type:
        return _frames(body)
    if "json" in content_type and "ndjson" not in content_type:
        parsed = _json(body)
        return [Piece(b"", parsed)] if parsed is not None else [Piece(body)]
    out = []
    for line in body.splitlines(keepends=True):
        head = b"data: " if line.startswith(b"data: ") else b"data:" * line.startswith(b"data:")
        text = line[len(head) :].rstrip(b"\r\n")
        parsed = _json(text)
        tail = line[len(head) + len(text) :]
        out.append(Piece(head, parsed, tail) if parsed is not None else Piece(line))
    return out


def _json(text: bytes) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def _frames(body: bytes) -> list[Piece]:
    decoder = EventStreamDecoder()
    out = []
    for frame in decoder.feed(body):
        headers = {k: str(v) for k, v in frame.headers.items()}
        parsed = _json(frame.payload)
        if parsed is None:
            out.append(Piece(encode_frame(headers, frame.payload)))
        else:
            out.append(Piece(b"", parsed, frame_headers=headers))
    return out


def joined(parts: list[Piece], at: int = -1, data: Any = None) -> bytes:
    """The body again, piece ``at`` written with ``data`` in place of its own."""
    out = []
    for i, piece in enumerate(parts):
        if piece.data is None:
            out.append(piece.head)
            continue
        text = json.dumps(data if i == at else piece.data).encode()
        if piece.frame_headers is not None:
            out.append(encode_frame(piece.frame_headers, text))
        else:
            out.append(piece.head + text + piece.tail)
    return b"".join(out)


# Spots: one string or key of one payload ----------------------------------------------------


@dataclass(frozen=True)
class Spot:
    piece: int
    path: tuple[Any, ...]  # keys and list indexes to the string (or, for a key, its dict)
    key: str | None = None  # set: the spot is this key of the dict at ``path``

    def kind(self, parts: list[Piece]) -> tuple[Any, ...]:
        """What the spot is, whichever event or list item of its kind it is in: the path with
        list indexes left out, the ``type`` of each object on it (an event's, an item's, a
        block's), and whether it is a key."""
        value, kinds = parts[self.piece].data, []
        for step in (*self.path, None):
            if isinstance(value, dict):
                kind = value.get("type", value.get("event"))
                kinds.append(kind if isinstance(kind, str) else None)
            if step is not None:
                value = value[step]
        shape = tuple("#" if isinstance(p, int) else p for p in self.path)
        return (tuple(kinds), shape, self.key)


def spots(parts: list[Piece]) -> Iterator[Spot]:
    for i, piece in enumerate(parts):
        if piece.data is not None:
            yield from _spots(i, piece.data, ())


def _spots(i: int, value: Any, path: tuple[Any, ...]) -> Iterator[Spot]:
    if isinstance(value, str):
        yield Spot(i, path)
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield Spot(i, path, key)
            yield from _spots(i, inner, (*path, key))
    elif isinstance(value, list):
        for n, inner in enumerate(value):
            yield from _spots(i, inner, (*path, n))


def mutated(parts: list[Piece], spot: Spot, lone: str, after: bool = False) -> bytes:
    """The body with the spot's string (or key) replaced by ``lone`` (``after``: a value
    with ``lone`` added at its end, so it still means what it meant)."""
    data = json.loads(json.dumps(parts[spot.piece].data))
    holder = data
    for step in spot.path[:-1] if spot.key is None else spot.path:
        holder = holder[step]
    if spot.key is None:
        holder[spot.path[-1]] = holder[spot.path[-1]] + lone if after else lone
    else:
        items = [(lone if k == spot.key else k, v) for k, v in holder.items()]
        holder.clear()
        holder.update(items)
    return joined(parts, spot.piece, data)


# Recorded replies and their replay ----------------------------------------------------------


@dataclass
class Recorded:
    name: str
    api: str
    status: int
    content_type: str
    body: bytes
    streamed: bool
    replay: Callable[[bytes], Awaitable[Replayed]]  # raising as the call does

    def __str__(self) -> str:
        return self.name


def recorded() -> list[Recorded]:
    found = []
    for path in sorted(CASSETTES.glob("*/*.yaml")):
        for i, interaction in enumerate(Cassette.load(path).interactions):
            response = interaction.response
            content_type = response.headers.get("content-type", "application/json")
            body = b"".join(response.body_chunks())
            streamed = bool((interaction.request.body or {}).get("stream")) or any(
                t in content_type for t in ("event-stream", "ndjson")
            )
            provider = path.parent.name
            found.append(
                Recorded(
                    f"{provider}/{path.name}#{i}",
                    provider,
                    response.status,
                    content_type,
                    body,
                    streamed,
                    _cassette_replay(provider, response.status, content_type, streamed),
                )
            )
    for exchange in real.EXCHANGES:
        if exchange.api == "ollama" and exchange.uri != "/api/chat":
            continue
        found.append(
            Recorded(
                f"real:{exchange}",
                exchange.api,
                exchange.status,
                exchange.content_type,
                exchange.body,
                exchange.streamed,
                _real_replay(exchange),
            )
        )
    return found


async def _call(adapter: Any, request: CanonicalRequest) -> Replayed:
    try:
        if request.stream:
            return [event async for event in adapter.stream(request)], None
        return [], await adapter.complete(request)
    finally:
        await adapter.aclose()


def _cassette_replay(
    provider: str, status: int, content_type: str, streamed: bool
) -> Callable[[bytes], Awaitable[Replayed]]:
    async def replay(body: bytes) -> Replayed:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(status, headers={"content-type": content_type}, content=body)

        adapter = build_adapter(
            provider,
            AdapterConfig(
                api_key=None if provider == "ollama" else "k",
                max_retries=0,
                http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
            ),
            tool_id_store=InMemoryToolIdStore(),
        )
        request = CanonicalRequest(
            model=f"{provider}:recorded",
            messages=[Message.user("hi")],
            max_output_tokens=1000,
            session_id="surrogates",
            stream=streamed,
        )
        return await _call(adapter, request)

    return replay


def _real_replay(exchange: Exchange) -> Callable[[bytes], Awaitable[Replayed]]:
    async def replay(body: bytes) -> Replayed:
        changed = dataclasses.replace(exchange, body=body)
        adapter = real.adapter_for(changed, len(body) or 1, [])
        return await _call(adapter, real.request_for(changed))

    return replay


# Judging one replay ---------------------------------------------------------------------------


async def fault(source: Recorded, body: bytes) -> str | None:
    """What is wrong with the replay of ``body`` (None: nothing)."""
    try:
        events, response = await source.replay(body)
    except AdapterError as error:
        shown = [str(error), repr(error), error.describe()]
        if error.partial_response is not None:
            shown.append(error.partial_response.model_dump(mode="json"))
        return _unencodable(shown, f"{type(error).__name__}: {error!r}")
    except Exception as error:  # every exception is a fault here: reported, not raised
        return f"bare {type(error).__name__}: {error!r}"[:400]
    shown = [event.to_dict() for event in events]
    if response is not None:
        shown.append(response.model_dump(mode="json"))
    return _unencodable(shown, "the reply")


def _unencodable(values: list[Any], what: str) -> str | None:
    try:
        json.dumps(values, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        text = exc.object if isinstance(exc.object, str) else ""
        around = text[max(0, exc.start - 120) : exc.end + 40]
        return f"unencodable ({what[:200]}): ...{around!r}"
    return None


@dataclass(frozen=True)
class Case:
    source: Recorded
    parts: list[Piece]
    spot: Spot
    lone: str
    after: bool  # ``lone`` added at the end of the value, else in its place

    def __str__(self) -> str:
        how = "after" if self.after else "as"
        spot = self.spot
        return f"{self.source} piece {spot.piece} {spot.path} key={spot.key!r} {how} {self.lone!r}"

    async def fault(self) -> str | None:
        return await fault(self.source, mutated(self.parts, self.spot, self.lone, self.after))


def cases(sources: list[Recorded], every_source: bool) -> list[Case]:
    """Each kind of spot of each source (``every_source``), or of each API once, in its
    shortest source: a value as a lone high surrogate and with a lone low one after it, a key
    as a lone high surrogate."""
    chosen: dict[tuple[Any, ...], tuple[Recorded, list[Piece], Spot]] = {}
    for source in sorted(sources, key=lambda s: len(s.body)):
        parts = pieces(source.body, source.content_type)
        where = (source.name,) if every_source else (source.api, source.streamed, source.status)
        for spot in spots(parts):
            chosen.setdefault((*where, *spot.kind(parts)), (source, parts, spot))
    return [
        Case(source, parts, spot, lone, after)
        for source, parts, spot in chosen.values()
        for lone, after in ((LONE[0], False), (LONE[1], True))[: 1 if spot.key else 2]
    ]


def faults(chosen: list[Case]) -> list[str]:
    """What is wrong with each case, replayed in one event loop."""

    async def run() -> list[str]:
        found = []
        for case in chosen:
            with anyio.fail_after(30):
                fault = await case.fault()
            if fault is not None:
                found.append(f"{case}:\n    {fault}")
        return found

    return anyio.run(run)
