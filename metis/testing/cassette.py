"""Cassettes: recorded HTTP exchanges that tests replay with no network.

A cassette is a YAML file::

    version: 1
    name: anthropic_tool_stream          # free text
    notes: how it was made               # free text, optional
    interactions:                        # served in order, one per request
      - request:
          method: POST
          url: https://api.anthropic.com/v1/messages
          headers: {anthropic-version: "2023-06-01"}   # keys are never stored
          body: {...}                    # the JSON body sent; replay checks it (golden)
        response:
          status: 200
          headers: {content-type: text/event-stream}
          chunks:                        # the body as it arrived, one entry per chunk,
            - "event: message_start\\n..."  # so chunk boundaries replay exactly

``chunks_base64`` may stand in for ``chunks`` when a body is not UTF-8. A request ``body`` may
be omitted to accept any body. ``ReplayTransport`` serves a cassette to an
``httpx.AsyncClient``; ``RecordingTransport`` wraps a real transport and writes one.
"""

from __future__ import annotations

import base64
import difflib
import json
import zlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from metis.core.secrets import header_secrets, is_secret_header, scrub_url, url_secrets
from metis.errors import redact
from metis.testing.scrub import BodyDecoder, scrub_chunks, secret_pattern

_SCRUBBED = "[REDACTED]"
# libyaml's safe loader where PyYAML has it (its wheels do): the same documents, ten times faster
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class RecordedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = "POST"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] | None = None


class RecordedResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: int = 200
    headers: dict[str, str] = Field(default_factory=dict)
    chunks: list[str] | None = None
    chunks_base64: list[str] | None = None

    @model_validator(mode="after")
    def _one_body(self) -> RecordedResponse:
        if (self.chunks is None) == (self.chunks_base64 is None):
            raise ValueError("a response needs exactly one of 'chunks' and 'chunks_base64'")
        return self

    def body_chunks(self) -> list[bytes]:
        if self.chunks is not None:
            return [c.encode("utf-8") for c in self.chunks]
        return [base64.b64decode(c) for c in self.chunks_base64 or []]


class Interaction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: RecordedRequest
    response: RecordedResponse


class Cassette(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = 1
    name: str = ""
    notes: str = ""
    interactions: list[Interaction] = Field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
        return cls.model_validate(data)

    def dump(self, path: str | Path) -> None:
        data = self.model_dump(exclude_none=True, exclude_defaults=False)
        Path(path).write_text(
            yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8"
        )


class CassetteMismatch(AssertionError):
    """The code under test sent a request the cassette did not record."""


class ReplayTransport(httpx.AsyncBaseTransport):
    """Serves a cassette's interactions in order and checks each request against its record."""

    def __init__(self, cassette: Cassette | str | Path, *, check_body: bool = True) -> None:
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
        self.check_body = check_body
        self.requests: list[httpx.Request] = []

    @property
    def remaining(self) -> int:
        return len(self.cassette.interactions) - len(self.requests)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        position = len(self.requests)
        if position >= len(self.cassette.interactions):
            raise CassetteMismatch(
                f"cassette {self.cassette.name!r} has {position} interactions; "
                f"request {position + 1} ({request.method} {request.url}) was not recorded"
            )
        recorded = self.cassette.interactions[position]
        self.requests.append(request)
        _check_request(recorded.request, request, position, self.check_body)
        return httpx.Response(
            recorded.response.status,
            headers=recorded.response.headers,
            stream=_ChunkStream(recorded.response.body_chunks()),
            request=request,
        )


class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes requests to ``inner`` and records each exchange, secrets scrubbed; the
    recording is ``transport.cassette()`` once the responses have been read.

    The secrets are ``secrets`` plus those each request carries (its auth headers and
    non-public query values). A compressed response is stored decoded, and each secret is
    replaced wherever it appears in it: across chunk boundaries, JSON-escaped or
    percent-encoded, in a body that is not UTF-8 (:mod:`metis.testing.scrub`)."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        *,
        name: str = "",
        notes: str = "",
        secrets: Iterable[str | None] = (),
    ) -> None:
        self.inner = inner
        self.name = name
        self.notes = notes
        self.secrets = {s for s in secrets if s}
        self._exchanges: list[_Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        secrets = (
            self.secrets | set(header_secrets(request.headers)) | set(url_secrets(str(request.url)))
        )
        pattern = secret_pattern(secrets)
        sent = json.loads(scrub_chunks([body], pattern)[0]) if body else None
        recorded = RecordedRequest(
            method=request.method,
            url=redact(scrub_url(str(request.url)), *secrets),
            headers=scrub_headers(request.headers.items(), secrets),
            body=sent,
        )
        response = await self.inner.handle_async_request(request)
        chunks: list[bytes] = []
        self._exchanges.append(_Exchange(recorded, response, chunks, tuple(secrets)))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response, chunks),
            request=request,
        )

    def cassette(self) -> Cassette:
        interactions = []
        for exchange in self._exchanges:
            headers, chunks = _decoded(exchange.response, exchange.chunks)
            chunks = scrub_chunks(chunks, secret_pattern(exchange.secrets))
            try:
                text: list[str] | None = [c.decode("utf-8") for c in chunks]
                encoded = None
            except UnicodeDecodeError:
                text, encoded = None, [base64.b64encode(c).decode() for c in chunks]
            interactions.append(
                Interaction(
                    request=exchange.request,
                    response=RecordedResponse(
                        status=exchange.response.status_code,
                        headers=scrub_headers(headers.items(), exchange.secrets),
                        chunks=text,
                        chunks_base64=encoded,
                    ),
                )
            )
        return Cassette(name=self.name, notes=self.notes, interactions=interactions)


@dataclass
class _Exchange:
    request: RecordedRequest
    response: httpx.Response
    chunks: list[bytes]
    secrets: tuple[str, ...]


def _decoded(response: httpx.Response, raw: list[bytes]) -> tuple[dict[str, str], list[bytes]]:
    """The response's headers and body chunks with its content-encoding undone (the secrets
    are then visible to the scrubber); a body that cannot be decoded is not kept."""
    headers = dict(response.headers.items())
    encoding = response.headers.get("content-encoding", "")
    decoder = BodyDecoder(encoding)
    if not decoder.encodings:
        return headers, raw
    headers = {
        k: v for k, v in headers.items() if k.lower() not in ("content-encoding", "content-length")
    }
    try:
        if not decoder.can_decode:
            raise ValueError(f"no decoder for content-encoding {encoding!r}")
        chunks = [decoder.decode(chunk) for chunk in raw] + [decoder.flush()]
    except (ValueError, zlib.error) as exc:
        return headers, [
            f"[body not recorded: it could not be decoded to scrub it: {exc}]".encode()
        ]
    return headers, [chunk for chunk in chunks if chunk]


def scrub_headers(items: Iterable[tuple[str, str]], secrets: Iterable[str] = ()) -> dict[str, str]:
    skip = {"content-length", "host", "accept-encoding", "connection", "user-agent", "accept"}
    hidden = tuple(secrets)
    return {
        k.lower(): (_SCRUBBED if is_secret_header(k) else redact(v, *hidden))
        for k, v in items
        if k.lower() not in skip
    }


class _ChunkStream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _Tee(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response, chunks: list[bytes]) -> None:
        self._response = response
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        stream = self._response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        async for chunk in stream:
            self._chunks.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


def _check_request(
    recorded: RecordedRequest, request: httpx.Request, position: int, check_body: bool
) -> None:
    where = f"request {position + 1}"
    url = str(request.url)
    if request.method != recorded.method or recorded.url not in (url, scrub_url(url)):
        raise CassetteMismatch(
            f"{where}: sent {request.method} {request.url}, "
            f"recorded {recorded.method} {recorded.url}"
        )
    for key, value in recorded.headers.items():
        if _SCRUBBED not in value and request.headers.get(key) != value:
            raise CassetteMismatch(
                f"{where}: header {key!r} is {request.headers.get(key)!r}, recorded {value!r}"
            )
    if check_body and recorded.body is not None:
        sent = json.loads(request.content) if request.content else None
        if sent != recorded.body:
            raise CassetteMismatch(
                f"{where}: body differs from the recording:\n{_diff(recorded.body, sent)}"
            )


def _diff(expected: Any, actual: Any) -> str:
    a = json.dumps(expected, indent=1, sort_keys=True).splitlines()
    b = json.dumps(actual, indent=1, sort_keys=True).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "recorded", "sent", lineterm="", n=2))
