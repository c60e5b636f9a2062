"""An upstream's failure as the gateway's client is told it (docs/gateway.md, "Errors"): the
library names where a connection went (``connection to anthropic at http://10.0.0.5:443
failed``), so its user sees a wrong base URL; a gateway's client must not see its internal
hosts. What the library says of a connection (a network failure, a redirect) is said without
any URL, host, IP address or port in it; of an answer it could not read, without URLs and IP
addresses; anything else (a provider's own answer) as it came, but for IP addresses. The
operator's access line keeps the whole message (metis.gateway.access)."""

from __future__ import annotations

import re

from metis.errors import AdapterError, NetworkError, ProtocolError, RedirectError

UPSTREAM = "the upstream"
_URL = r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\",;()]+"
_AT = re.compile(rf"\s+at\s+{_URL}")
_ADDRESSES = re.compile(
    r"\(\s*'[^']*'\s*(?:,\s*\d+\s*)+\)"  # a socket address, as Python writes one
    r"|\[[0-9A-Fa-f.%]*:[0-9A-Fa-f:.%]*\](?::\d+)?"  # an IPv6 address (a URL's): a colon in it
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"  # an IPv4 address
)
_URLS = re.compile(rf"{_URL}|{_ADDRESSES.pattern}")
_MADE = re.compile(
    rf"{_URL}"
    rf"|{_ADDRESSES.pattern}"
    r"|\b(?:[A-Za-z0-9-]+\.)+[A-Za-z][A-Za-z0-9-]*(?::\d+)?\b"  # a host name
    r"|\b[A-Za-z0-9-]+:\d{1,5}\b"  # a host and port (localhost:8080)
)
_CONNECTING = (NetworkError, RedirectError)
"""What the library says of reaching an upstream: every host named in it is the upstream's."""


def shown(error: AdapterError) -> str:
    """``error``'s message as the gateway's client is given it."""
    message = error.message
    if error.provider is None and error.provider_status is None:
        return message  # the gateway's own: it names no upstream
    if isinstance(error, _CONNECTING):
        return _MADE.sub(_hidden, _AT.sub("", message))
    if isinstance(error, ProtocolError):  # it may name a model (anthropic.claude-...), no host
        return _URLS.sub(_hidden, _AT.sub("", message))
    return _ADDRESSES.sub(_hidden, message)


def _hidden(found: re.Match[str]) -> str:
    return f"({UPSTREAM})" if found[0].startswith("(") else UPSTREAM
