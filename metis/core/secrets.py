"""Which configured values are secrets, and hiding them from URLs and httpx's log lines.

An adapter's secrets are its API key, the values of secret-looking headers passed in
``extra_headers`` (and the token after a ``Bearer`` scheme), and the values of a base URL's
query string and user-info. :func:`metis.core.redaction.redact` hides each of them wherever it
appears; this module only says which they are.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from metis.core.redaction import redact


@functools.cache
def _secret_name() -> re.Pattern[str]:
    return re.compile(
        r"auth|key|token|secret|passw|cookie|signature|credential|\bsig\b", re.IGNORECASE
    )


SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token"}
)
"""The headers that carry credentials, whatever their names say."""

PUBLIC_QUERY_PARAMS = frozenset({"alt", "api-version", "api_version", "version", "beta"})
"""Query parameters that carry no secret (Gemini's ``alt=sse``, Azure's ``api-version``)."""


def is_secret_header(name: str) -> bool:
    """A header whose value is a credential: the known auth headers, and any whose name
    says key, token, secret, auth, password, cookie or signature."""
    lowered = name.lower()
    return lowered in SECRET_HEADERS or bool(_secret_name().search(lowered))


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credential values among ``headers``, and the token after a scheme (``Bearer x``)."""
    found: list[str] = []
    for name, value in headers.items():
        if value and is_secret_header(name):
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token.strip() and scheme.isalpha():
                found.append(token.strip())
    return found


_OPAQUE = 16  # a query value this long under an unknown name is treated as a key


def url_secrets(url: str | None) -> list[str]:
    """The password (or user-info) of ``url``, and its query values that are keys: those
    named like one (``key``, ``token``, ``sig``...) and long opaque values under other names
    (public ones such as ``alt`` and ``api-version`` aside)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.password or parts.username or ""]
        found += [
            value
            for name, value in parse_qsl(parts.query, keep_blank_values=False)
            if is_secret_header(name)
            or (name.lower() not in PUBLIC_QUERY_PARAMS and len(value) >= _OPAQUE)
        ]
    except ValueError:  # a malformed URL (bad port, bad IPv6): its whole query is suspect
        found = [url.partition("?")[2]]
    return [value for value in found if value]


def collect(
    api_key: str | None, headers: Mapping[str, str], base_url: str | None
) -> tuple[str, ...]:
    """Every secret of one adapter's configuration, longest first (so a key that contains
    another is hidden whole)."""
    found: Iterable[str] = [api_key or "", *header_secrets(headers), *url_secrets(base_url)]
    return tuple(sorted({s for s in found if s}, key=len, reverse=True))


@functools.cache
def _query_value() -> re.Pattern[str]:
    return re.compile(r"([?&])([^=&#\s]+)=([^&#\s\"']*)")


def scrub_url(url: str) -> str:
    """``url`` with every non-public query value and any user-info replaced."""

    def hide(match: re.Match[str]) -> str:
        sep, name, value = match.groups()
        if name.lower() in PUBLIC_QUERY_PARAMS or not value:
            return match.group(0)
        return f"{sep}{name}=[REDACTED]"

    return redact(_query_value().sub(hide, url))


class HttpxRequestLineFilter(logging.Filter):
    """Hides query-string keys in the request line httpx logs at INFO
    (``HTTP Request: POST https://...?key=... "HTTP/1.1 200 OK"``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_scrub_arg(arg) for arg in record.args)
        elif isinstance(record.msg, str) and "?" in record.msg:
            record.msg = scrub_url(record.msg)
        return True


def _scrub_arg(arg: Any) -> Any:
    text = str(arg) if arg.__class__.__name__ == "URL" else arg
    return scrub_url(text) if isinstance(text, str) and ("?" in text or "@" in text) else arg


_HTTPX_FILTER = HttpxRequestLineFilter()


def install_httpx_log_filter() -> None:
    """Attach the filter to the loggers of httpx and of httpx2 (which logs as "httpx2"), once."""
    for name in ("httpx", "httpx2"):
        logger = logging.getLogger(name)
        if _HTTPX_FILTER not in logger.filters:
            logger.addFilter(_HTTPX_FILTER)
