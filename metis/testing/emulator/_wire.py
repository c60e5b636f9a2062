"""What every wire format shares: the parsed HTTP request, the replies, SSE/NDJSON frames,
deterministic ids and signatures, and the delta splitting that makes a stream look real.

Nothing here knows a provider; nothing here imports metis outside this package.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metis.testing.emulator.responder import Responder


@dataclass(slots=True)
class HttpRequest:
    """One request as the server read it (header names lower-cased, the query parsed)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    number: int = 0

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def digest(self) -> bytes:
        """Identifies the request's content: the same request gets the same ids and reply."""
        return hashlib.sha256(
            self.method.encode() + b" " + self.path.encode() + b"\n" + self.body
        ).digest()


@dataclass(slots=True)
class JsonReply:
    """A whole (non-streamed) answer: a JSON body, or raw bytes when ``raw`` is set."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    indent: int | None = None
    separators: tuple[str, str] = (",", ":")

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(
            self.body, ensure_ascii=False, indent=self.indent, separators=self.separators
        ).encode()


@dataclass(slots=True, frozen=True)
class Frame:
    """One stream event as bytes: ``head`` + JSON ``payload`` + ``tail`` (each flushed alone)."""

    head: bytes
    payload: bytes
    tail: bytes

    def encode(self) -> bytes:
        return self.head + self.payload + self.tail

    def truncated(self) -> bytes:
        """The same frame with its JSON cut in half: a malformed chunk, framing intact."""
        cut = max(1, len(self.payload) // 2)
        return self.head + self.payload[:cut] + self.tail


@dataclass(slots=True)
class StreamReply:
    """A streamed answer: frames written one chunk each, then the chunked terminator.

    ``error_frames(kind)`` is what this provider sends when an error happens inside a 200
    stream (the stream then ends); the fault injector splices it in.
    """

    frames: list[Frame]
    headers: dict[str, str]
    error_frames: Callable[[str], list[Frame]]
    status: int = 200


class ApiError(Exception):
    """Raised by a wire format when the request is refused; ``reply`` is the error response."""

    def __init__(self, reply: JsonReply) -> None:
        super().__init__(reply.status)
        self.reply = reply


# --- framing --------------------------------------------------------------------------------


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def sse(data: Any, event: str | None = None, *, sep: bytes = b"\n\n", pad: int = 0) -> Frame:
    """An SSE event: optional ``event:`` line, one ``data:`` line, a blank line."""
    head = (b"event: " + event.encode() + b"\n" if event else b"") + b"data: "
    payload = data if isinstance(data, bytes) else dumps(data)
    return Frame(head, payload, b" " * pad + sep)


def ndjson(data: Any) -> Frame:
    return Frame(b"", dumps(data), b"\n")


# --- deterministic ids, times, signatures ----------------------------------------------------

_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_HEX = "0123456789abcdef"
_LOWER = "0123456789abcdefghijklmnopqrstuvwxyz"
ALPHABETS = {"alnum": _ALNUM, "b58": _B58, "hex": _HEX, "lower": _LOWER}


class Ids:
    """Ids derived from the request's digest: the same request always gets the same ids."""

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._n = 0

    def token(self, length: int, alphabet: str = "alnum") -> str:
        chars = ALPHABETS[alphabet]
        out: list[str] = []
        while len(out) < length:
            self._n += 1
            block = hashlib.sha256(self._seed + self._n.to_bytes(4, "big")).digest()
            out.extend(chars[b % len(chars)] for b in block)
        return "".join(out[:length])


SIGNING_KEY = b"metis-emulator-signing-key-v1"


def sign(kind: str, text: str) -> bytes:
    return hmac.new(SIGNING_KEY, kind.encode() + b"\x00" + text.encode(), hashlib.sha256).digest()


def signature(kind: str, text: str) -> str:
    """An opaque signature over ``text`` that only this emulator issues (and accepts back)."""
    mac = sign(kind, text)
    return base64.b64encode(b"EMU1" + mac + hashlib.sha256(mac).digest()[:16]).decode()


def verify(kind: str, text: str, sig: str) -> bool:
    try:
        raw = base64.b64decode(sig.encode(), validate=False)
    except (ValueError, TypeError):
        return False
    return raw.startswith(b"EMU1") and hmac.compare_digest(raw[4:36], sign(kind, text))


def now_unix() -> int:
    return int(time.time())


def rfc3339_nanos() -> str:
    ns = time.time_ns()
    secs, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


# --- how a reply is cut into deltas ----------------------------------------------------------

_PIECES = re.compile(r"\s*\S+|\s+$")
_GROUPS = (1, 2, 1, 3, 2)


def split_text(text: str) -> list[str]:
    """Text as a model streams it: a word or a few per delta, never one delta for two words."""
    if not text:
        return []
    pieces = _PIECES.findall(text)
    if len(pieces) <= 1:
        if len(text) < 2:
            return [text]
        half = len(text) // 2
        return [text[:half], text[half:]]
    out: list[str] = []
    i = 0
    k = 0
    while i < len(pieces):
        size = _GROUPS[k % len(_GROUPS)]
        out.append("".join(pieces[i : i + size]))
        i += size
        k += 1
    return out


_JSON_SIZES = (2, 7, 3, 5, 4)


def split_json(text: str) -> list[str]:
    """Tool arguments in fragments (never whole, unless they are one or two characters)."""
    if len(text) <= 2:
        return [text]
    out: list[str] = []
    i = 0
    k = 0
    while i < len(text):
        size = _JSON_SIZES[k % len(_JSON_SIZES)]
        out.append(text[i : i + size])
        i += size
        k += 1
    return out


def count_tokens(text: str) -> int:
    """The emulator's token count: a quarter of the characters, at least one for any text."""
    return (len(text) + 3) // 4 if text else 0


@dataclass(slots=True)
class Env:
    """What a wire format may use besides the request: the scripted model and shared state."""

    responder: Responder
    responses: dict[str, list[dict[str, Any]]]
    context_tokens: dict[str, int]
    strict_signatures: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)


class Provider:
    """One wire format: which paths it serves, how it authenticates, how it fails, how it
    answers. Subclasses implement every method."""

    name: str = ""

    def route(self, method: str, path: str) -> str | None:
        """The endpoint this request is for (None: not this provider's path)."""
        raise NotImplementedError

    def allowed_methods(self, path: str) -> list[str]:
        """Methods this provider serves at ``path`` (for a 405)."""
        raise NotImplementedError

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        """An error reply when the request's credentials are missing or refused."""
        raise NotImplementedError

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        """The error reply for a status fault (rate_limit, overloaded, server_error, auth,
        context_overflow), in this provider's format."""
        raise NotImplementedError

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        raise NotImplementedError


def parse_json_object(request: HttpRequest, bad: Callable[[str], JsonReply]) -> dict[str, Any]:
    """The body as a JSON object, or ApiError(bad(message))."""
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(bad(f"The request body is not valid JSON: {exc}")) from None
    if not isinstance(body, dict):
        raise ApiError(bad("The request body must be a JSON object."))
    return body


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def tool_name_ok(name: Any, limit: int = 64) -> bool:
    return isinstance(name, str) and bool(re.fullmatch(rf"[a-zA-Z0-9_-]{{1,{limit}}}", name))


def text_of(value: Any) -> str:
    """Text from a string or a list of text-ish blocks (tool results come both ways)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict):
                text = item.get("text", item.get("content"))
                if isinstance(text, str):
                    parts.append(text)
                elif isinstance(text, list):
                    parts.append(text_of(text))
        return "\n".join(p for p in parts if p)
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
