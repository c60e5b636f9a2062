"""The recorded provider traffic in ../shared/real-traffic, read once into :class:`Exchange`
objects, each filed under the stack that speaks its API (by the recorded URL, so a Gemini call
filed in another folder is still a Gemini exchange).

Two formats (the folder's README describes them): VCR cassettes (``*.yaml``) and raw HTTP
traces (``*.httprr``), plus one bare Ollama JSON answer. Point ``METIS_REAL_TRAFFIC`` elsewhere
to replay another copy.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(
    os.environ.get("METIS_REAL_TRAFFIC", Path(__file__).parents[2] / "shared" / "real-traffic")
)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads them 9x faster
GEMINI_URI = re.compile(
    r"^https://(?P<host>generativelanguage|aiplatform)\.googleapis\.com(?P<prefix>/.*)/models/"
    r"(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent\?alt=sse)$"
)
EVENT_STREAM = "text/event-stream"
JSON = "application/json"


@dataclass(frozen=True)
class Exchange:
    """One recorded request and the reply it got, as the replay serves it."""

    source: str  # folder/file#index
    api: str  # the stack that speaks it
    uri: str
    status: int
    streamed: bool
    content_type: str  # what the replayed reply says it is
    body: bytes  # as the client reads it (transfer encoding undone)
    request: dict[str, Any]  # the recorded request body
    next_request: dict[str, Any] | None = None  # the same client's next request, if any

    def __str__(self) -> str:
        return self.source


def api_of(uri: str) -> str | None:
    """The stack a recorded URL belongs to; None for an endpoint no replay covers."""
    if "api.anthropic.com/v1/messages?" in uri or uri.endswith("api.anthropic.com/v1/messages"):
        return "anthropic"
    if uri.endswith("/v1/chat/completions"):
        return "openai"
    if uri.endswith("/v1/responses"):
        return "openai_responses"
    if GEMINI_URI.match(uri):
        return "gemini"
    if uri.startswith("https://bedrock-runtime.") and "/model/" in uri:
        return "bedrock"
    return None


def exchanges() -> list[Exchange]:
    if not ROOT.is_dir():
        return []
    found = [e for path in sorted(ROOT.glob("*/*.yaml")) for e in _from_cassette(path)]
    for path in sorted(ROOT.glob("ollama/*.httprr")):
        found += _from_httprr(path)
    for path in sorted(ROOT.glob("ollama/*.json")):  # a bare, non-streamed /api/chat answer
        source = f"{path.parent.name}/{path.name}"
        body = path.read_bytes()
        found.append(Exchange(source, "ollama", "/api/chat", 200, False, JSON, body, {}))
    return found


def recorded_request_bodies(api: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every recorded request body sent to ``api``, with where it was found."""
    for path in sorted(ROOT.glob("*/*.yaml")) if ROOT.is_dir() else []:
        for i, interaction in enumerate(interactions(path)):
            request = interaction["request"]
            if api_of(request["uri"]) == api:
                yield f"{path.parent.name}/{path.name}#{i}", _request_body(request)


def cassettes(folder: str) -> list[Path]:
    """The recorded cassettes of one folder of the real traffic (none when it is absent)."""
    where = ROOT / folder
    return sorted(where.glob("*.yaml")) if where.is_dir() else []


@functools.cache
def interactions(path: Path) -> list[dict[str, Any]]:
    """A cassette's interactions, read once."""
    found: list[dict[str, Any]] = (
        yaml.load(path.read_text(), Loader=_LOADER).get("interactions") or []
    )
    return found


def _from_cassette(path: Path) -> Iterator[Exchange]:
    recorded = interactions(path)
    for i, interaction in enumerate(recorded):
        uri = interaction["request"]["uri"]
        api = api_of(uri)
        if api is None:
            continue
        response = interaction["response"]
        headers = {k.lower(): v[0] for k, v in (response.get("headers") or {}).items()}
        raw = (response.get("body") or {}).get("string")
        if isinstance(raw, bytes) and raw:  # a binary event stream, stored as !!binary
            body = raw
        elif isinstance(raw, str):
            body = raw.encode()
        else:
            body = json.dumps(response["parsed_body"]).encode()
        status = response["status"]["code"]
        streamed, content_type = _served_as(api, uri, status, headers.get("content-type", ""))
        following = recorded[i + 1]["request"] if i + 1 < len(recorded) else {}
        yield Exchange(
            source=f"{path.parent.name}/{path.name}#{i}",
            api=api,
            uri=uri,
            status=status,
            streamed=streamed,
            content_type=content_type,
            body=body,
            request=_request_body(interaction["request"]),
            next_request=following.get("parsed_body"),
        )


def _served_as(api: str, uri: str, status: int, recorded_type: str) -> tuple[bool, str]:
    """Whether the reply streams, and the content type the replay serves it with."""
    if api == "bedrock":
        streamed = uri.endswith("-stream")
        binary = streamed and status == 200
        return streamed, "application/vnd.amazon.eventstream" if binary else JSON
    if api == "gemini":
        streamed = "streamGenerateContent" in uri
    else:
        streamed = "event-stream" in recorded_type
    return streamed, EVENT_STREAM if streamed else JSON


def _request_body(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("parsed_body"):
        parsed: dict[str, Any] = request["parsed_body"]
        return parsed
    raw = request.get("body") or "{}"
    if isinstance(raw, dict):  # some cassettes keep the body as YAML, not as its text
        return raw
    try:
        loaded = json.loads(raw)
    except (ValueError, TypeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


# Raw HTTP traces --------------------------------------------------------------------------


def _from_httprr(path: Path) -> list[Exchange]:
    found = []
    for i, (raw_request, raw_response) in enumerate(parse_httprr(path.read_bytes())):
        request_line, _, request_body = parse_http(raw_request)
        status_line, headers, body = parse_http(raw_response)
        target = request_line.split(" ", 2)[1]
        content_type = headers.get("content-type", "")
        found.append(
            Exchange(
                source=f"{path.parent.name}/{path.name}#{i}",
                api="ollama",
                uri=httpx.URL(target).path,
                status=int(status_line.split(" ", 2)[1]),
                streamed="ndjson" in content_type,
                content_type=content_type,
                body=body,
                request=json.loads(request_body) if request_body else {},
            )
        )
    return found


def parse_httprr(data: bytes) -> list[tuple[bytes, bytes]]:
    """``httprr trace v1``, then per exchange a line ``<request bytes> <response bytes>`` and
    the raw request and response, back to back."""
    header = b"httprr trace v1\n"
    if not data.startswith(header):
        raise ValueError("not an httprr trace")
    pos, out = len(header), []
    while pos < len(data):
        end = data.index(b"\n", pos)
        request_size, response_size = (int(n) for n in data[pos:end].split())
        pos = end + 1
        request = data[pos : pos + request_size]
        response = data[pos + request_size : pos + request_size + response_size]
        pos += request_size + response_size
        out.append((request, response))
    return out


def parse_http(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    """The start line, the headers (names lower-cased) and the body, de-chunked."""
    head, _, body = raw.partition(b"\r\n\r\n")
    start, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return start, headers, body


def dechunk(body: bytes) -> bytes:
    out, pos = [], 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2  # the chunk's own CRLF
