"""What crosses the boundary between the encoder and the transport."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from metis.errors import InvalidRequestError
from metis.model.cache import RequestedCache


def body_bytes(body: dict[str, Any]) -> bytes:
    """The bytes a JSON body is sent as (and, where a stage signs it, signed as). Text with a
    lone UTF-16 surrogate (a JSON ``"\\ud800"`` escape read as it is) has no UTF-8 form: an
    InvalidRequestError, not a UnicodeEncodeError; so is a value JSON has no form of."""
    try:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:  # an object, a cycle, given in provider_options...
        raise InvalidRequestError(
            f"the request's body has a value JSON cannot hold: {exc}"
        ) from None
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidRequestError(
            f"the request holds a lone UTF-16 surrogate ({text[exc.start]!r} at character "
            f"{exc.start} of its JSON body), which is not Unicode text and no provider takes"
        ) from None


@dataclass(slots=True)
class WireRequest:
    """An HTTP request in the provider's own format: ``body`` is its JSON document.

    ``content`` is the body's bytes once it is final: the engine serializes it once, when the
    request crosses into ``retry`` (:meth:`serialized`), and what an auth step signs is what
    the transport sends. A stage that replaces the body of a serialized request sets
    ``content=None`` with it."""

    url: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    method: str = "POST"
    content: bytes | None = field(default=None, repr=False)
    full_input: list[Any] | None = field(default=None, repr=False)
    """The whole transcript's input items, when ``continuation`` sent only the new ones
    against ``previous_response_id``: what a transport that cannot continue there (a new
    WebSocket connection, HTTP with ``store: false``) sends instead (:func:`whole_body`)."""
    cache: RequestedCache | None = field(default=None, repr=False)
    """What the canonical request asked of the prompt cache (the ``cache_control`` stage
    applies it in the dialect's form)."""
    unasked: Callable[[], dict[str, Any] | None] | None = field(
        default=None, repr=False, compare=False
    )
    """The body the encoder writes for the same request without the caller's settings, made
    only when asked (None: it could not be made): a stack's ``wire_fields`` ``drop`` reports
    what it removes only where the caller's settings made it (metis/stages/edits/wire_fields.py)."""

    def serialized(self) -> WireRequest:
        """This request with its body's bytes (itself, when they are there already)."""
        if self.content is not None:
            return self
        content = body_bytes(self.body) if self.method != "GET" else b""
        return dataclasses.replace(self, content=content)

    def whole(self) -> WireRequest:
        """This request with the whole transcript in place of ``previous_response_id`` and
        the new items (itself, when it continues nothing)."""
        if self.full_input is None:
            return self
        return dataclasses.replace(self, body=whole_body(self), content=None, full_input=None)

    def __repr__(self) -> str:
        from metis.core.secrets import is_secret_header, scrub_url

        shown = {k: "[REDACTED]" if is_secret_header(k) else v for k, v in self.headers.items()}
        url = scrub_url(self.url)
        return f"WireRequest({self.method} {url}, stream={self.stream}, headers={shown})"


def whole_body(request: WireRequest) -> dict[str, Any]:
    """``request``'s body with the whole transcript (see :attr:`WireRequest.full_input`)."""
    body = {k: v for k, v in request.body.items() if k != "previous_response_id"}
    if request.full_input is not None:
        body["input"] = request.full_input
    return body


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """The first item a transport yields for a successful answer, before its body's bytes:
    what the stages reading the body may need to know of the response itself."""

    status: int
    content_type: str | None = None
    """The ``content-type`` header, as sent (None when absent)."""


ResponseItem = bytes | ResponseHead
"""What a transport yields: a :class:`ResponseHead`, then the body's bytes as they arrive."""


class HTTPFailure(Exception):
    """A non-2xx answer, as received; the provider's codec turns it into an AdapterError."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers
        self.body = body
