"""What every wire format shares: the request as read, the replies, SSE and NDJSON frames,
deterministic ids and signatures, and the delta splitting that makes a stream look real.

Nothing here knows a provider.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class SocketMemory(dict[str, Any]):
    """A WebSocket connection's own memory: its last response (id -> the items it ends), and
    the connection's number (from 1, in the order connections were opened)."""

    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number


@dataclass(slots=True)
class HttpRequest:
    """One request as the server read it (header names lower-cased, the query parsed)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    number: int = 0
    connection: SocketMemory | None = None
    """A WebSocket connection's own memory (its last response), for a request that came as a
    ``response.create`` message on it (:mod:`.websocket`)."""

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def digest(self) -> bytes:
        """Identifies the request's content: the same request gets the same ids and reply."""
        return hashlib.sha256(
            self.method.encode() + b" " + self.path.encode() + b"\n" + self.body
        ).digest()

    def bearer(self) -> str:
        """The token of an ``Authorization: Bearer`` header ("" without one)."""
        scheme, _, token = (self.header("authorization") or "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" else ""


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
    """One stream event as bytes: ``head`` + JSON ``payload`` + ``tail`` (each sent alone)."""

    head: bytes
    payload: bytes
    tail: bytes

    def encode(self, alone: bool = False) -> bytes:
        """The frame as sent (``alone``: its payload only, a WebSocket message)."""
        return self.payload if alone else self.head + self.payload + self.tail

    def truncated(self, alone: bool = False) -> bytes:
        """The same frame with its JSON cut in half: a malformed chunk, framing intact."""
        half = Frame(self.head, self.payload[: max(1, len(self.payload) // 2)], self.tail)
        return half.encode(alone)


@dataclass(slots=True)
class StreamReply:
    """A streamed answer. ``error_frames(kind)`` is what the provider sends when an error
    happens inside a 200 stream (the stream then ends); the fault injector splices it in."""

    frames: list[Frame]
    headers: dict[str, str]
    error_frames: Callable[[str], list[Frame]]
    status: int = 200


Reply = JsonReply | StreamReply


def dumps(value: Any, separators: tuple[str, str] = (",", ":")) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=separators).encode()


def sse(data: Any, event: str | None = None, *, sep: bytes = b"\n\n", pad: int = 0) -> Frame:
    """An SSE event: optional ``event:`` line, one ``data:`` line, a blank line."""
    head = (b"event: " + event.encode() + b"\n" if event else b"") + b"data: "
    return Frame(head, data if isinstance(data, bytes) else dumps(data), b" " * pad + sep)


def ndjson(data: Any) -> Frame:
    return Frame(b"", dumps(data), b"\n")


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; a ValueError says why it is not one."""
    try:
        value = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"The request body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("The request body must be a JSON object.")
    return value


# --- deterministic ids, times, signatures ----------------------------------------------------

ALPHABETS = {
    "alnum": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "b58": "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
    "hex": "0123456789abcdef",
    "lower": "0123456789abcdefghijklmnopqrstuvwxyz",
}


class Ids:
    """Ids derived from a seed (the request's digest): the same request, the same ids."""

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


def request_ids(request: HttpRequest) -> Ids:
    """Ids for a request's headers: distinct per request even when bodies repeat."""
    return Ids(request.digest + request.number.to_bytes(8, "big"))


def request_uuid(request: HttpRequest) -> str:
    """A UUID naming the request (Bedrock's and Azure's request id headers)."""
    hexed = request_ids(request).token(32, "hex")
    return "-".join((hexed[:8], hexed[8:12], hexed[12:16], hexed[16:20], hexed[20:]))


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


def seal(kind: str, seed: str) -> str:
    """An opaque token only this emulator issues, that it can check on its own (a Gemini
    thought signature: nothing else comes back with it)."""
    nonce = hashlib.sha256(seed.encode()).digest()[:16]
    return base64.b64encode(b"EMU2" + nonce + sign(kind, nonce.hex())[:16]).decode()


def sealed(kind: str, token: str) -> bool:
    try:
        raw = base64.b64decode(token.encode(), validate=False)
    except (ValueError, TypeError):
        return False
    mac = sign(kind, raw[4:20].hex())[:16]
    return len(raw) == 36 and raw.startswith(b"EMU2") and hmac.compare_digest(raw[20:], mac)


ENCRYPTED_PREFIX = "gAAAAAB"


def encrypted_content(kind: str, text: str) -> str:
    """``text`` as an OpenAI ``encrypted_content`` (a Fernet-looking token) only this emulator
    opens: the text and its MAC, base64url after Fernet's prefix."""
    mac = base64.b64encode(sign(kind, text)).decode()
    payload = json.dumps({"s": text, "m": mac}).encode()
    return ENCRYPTED_PREFIX + base64.urlsafe_b64encode(payload).decode()


def opens_encrypted_content(kind: str, content: str) -> bool:
    """Whether ``content`` is an :func:`encrypted_content` of ``kind`` this emulator issued."""
    if not content.startswith(ENCRYPTED_PREFIX):
        return False
    try:
        payload = json.loads(base64.urlsafe_b64decode(content[len(ENCRYPTED_PREFIX) :].encode()))
        return isinstance(payload["s"], str) and base64.b64decode(payload["m"]) == sign(
            kind, payload["s"]
        )
    except (ValueError, KeyError, TypeError):
        return False


def now_unix() -> int:
    return int(time.time())


def rfc3339_nanos() -> str:
    secs, frac = divmod(time.time_ns(), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


# --- how a reply is cut into deltas ----------------------------------------------------------

_PIECES = re.compile(r"\s*\S+|\s+$")
_GROUPS = (1, 2, 1, 3, 2)
_JSON_SIZES = (2, 7, 3, 5, 4)


def split_text(text: str) -> list[str]:
    """Text as a model streams it: a word or a few per delta, never one delta for two words."""
    if not text:
        return []
    pieces = _PIECES.findall(text)
    if len(pieces) <= 1:
        half = len(text) // 2
        return [text] if len(text) < 2 else [text[:half], text[half:]]
    out: list[str] = []
    i = k = 0
    while i < len(pieces):
        size = _GROUPS[k % len(_GROUPS)]
        out.append("".join(pieces[i : i + size]))
        i, k = i + size, k + 1
    return out


def split_json(text: str) -> list[str]:
    """Tool arguments in fragments (never whole, unless they are one or two characters)."""
    if len(text) <= 2:
        return [text]
    out: list[str] = []
    i = k = 0
    while i < len(text):
        size = _JSON_SIZES[k % len(_JSON_SIZES)]
        out.append(text[i : i + size])
        i, k = i + size, k + 1
    return out


INLINE_TOKENS = 1600
"""What an inline file (an image, a PDF's page) counts for: about the most an image costs."""
_INLINE = re.compile(r"[A-Za-z0-9+/]{2048,}={0,2}")
"""Base64 data inline in a request (a run no text has): counted as a file, not as text."""


def count_tokens(text: str) -> int:
    """The emulator's token count: a quarter of the characters, at least one for any text,
    and :data:`INLINE_TOKENS` for each run of inline base64 data (the providers count an
    image by its size in pixels, not by its bytes)."""
    if len(text) >= 2048:
        text, files = _INLINE.subn("", text)
        return (len(text) + 3) // 4 + files * INLINE_TOKENS
    return (len(text) + 3) // 4 if text else 0


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def object_at(value: Any, key: str) -> dict[str, Any]:
    """``value[key]`` when both are objects, else an empty one (an optional field's settings)."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def text_of(value: Any) -> str:
    """Text from a string or a list of text-ish blocks (tool results come both ways)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if not isinstance(value, list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    parts = []
    for item in value:
        text = item.get("text", item.get("content")) if isinstance(item, dict) else item
        if isinstance(text, str | list):
            parts.append(text_of(text))
    return "\n".join(p for p in parts if p)
