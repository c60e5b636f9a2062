"""Transport failures that are the request's or the configuration's, not the network's: a
header no HTTP/1.1 message can carry, a URL that is not http(s), a redirect whose Location is
not a URL. Each would fail the same way on every attempt, so none is a retried NetworkError."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError, InvalidRequestError, RedirectError, redact
from metis.pipeline.call import Call

_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_BREAKS = re.compile(rb"[\r\n\0]")


def check_headers(raw: list[tuple[bytes, bytes]], call: Call) -> None:
    """An InvalidRequestError, before anything is sent, for a header whose name is not an
    HTTP token or whose value holds a line break or NUL (the value is never shown)."""
    for name, value in raw:
        if _TOKEN.fullmatch(name) is None:
            problem = f"the header name {name.decode('latin-1')[:60]!r} is not an HTTP token"
        elif _BREAKS.search(value) is not None:
            problem = f"the value of header {name.decode('latin-1')!r} holds a line break or NUL"
        else:
            continue
        raise InvalidRequestError(
            f"{call.provider}: {problem}; nothing was sent (check extra_headers)",
            provider=call.provider,
            request_id=call.request_id,
        )


def unsendable(exc: Exception, call: Call, url: Any, headers: Any) -> InvalidRequestError:
    """The InvalidRequestError of a request httpx cannot build: a header that is not ASCII
    (an API key or extra header pasted with a curly quote or an ellipsis), or a URL it cannot
    parse or encode (one a provider's answer named, a lone surrogate in it). The header's
    value is never shown."""
    problem = _not_ascii(headers)
    if problem is None:
        reason = exc.reason if isinstance(exc, UnicodeEncodeError) else str(exc)
        problem = f"the URL {redact(str(url))[:100]!r} cannot be sent ({redact(reason)})"
    return InvalidRequestError(
        f"{call.provider}: {problem}; nothing was sent",
        provider=call.provider,
        request_id=call.request_id,
    )


def check_header_text(headers: Mapping[str, str], call: Call) -> None:
    """:func:`check_headers` for headers as text, as a WebSocket upgrade sends them: one that
    is not ASCII is refused too, as httpx refuses it for a request."""
    problem = _not_ascii(headers)
    if problem is not None:
        raise InvalidRequestError(
            f"{call.provider}: {problem}; nothing was sent",
            provider=call.provider,
            request_id=call.request_id,
        )
    check_headers([(n.encode(), v.encode()) for n, v in headers.items()], call)


def _not_ascii(headers: Any) -> str | None:
    """What is wrong with the first header whose name or value is not ASCII, if one is."""
    for name, value in headers.items() if isinstance(headers, Mapping) else ():
        if not str(name).isascii():
            return f"the header name {redact(str(name))[:60]!r} is not an HTTP token"
        if isinstance(value, str) and not value.isascii():
            return (
                f"the value of header {redact(str(name))[:60]!r} is not ASCII, which HTTP "
                "headers carry (check api_key and extra_headers)"
            )
    return None


def refusal(exc: Exception, call: Call, url: Any) -> AdapterError | None:
    """The classified error of a client's failure that no retry would mend, else None."""
    kind = type(exc).__name__
    if kind == "UnsupportedProtocol":
        return InvalidRequestError(
            f"{call.provider}: the URL {str(url)[:100]!r} is not http:// or https:// (is "
            f"base_url right?): {exc}",
            provider=call.provider,
            request_id=call.request_id,
        )
    if kind == "RemoteProtocolError" and str(exc).startswith("Invalid URL in location header"):
        return RedirectError(
            f"{call.provider} answered a redirect whose Location is not a URL (is base_url "
            f"right?): {exc}",
            provider=call.provider,
            request_id=call.request_id,
        )
    return None
