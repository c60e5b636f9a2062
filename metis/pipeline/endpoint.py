"""Where one adapter's requests go: its URL, the headers every request carries, its secrets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from metis.core.secrets import collect as collect_secrets
from metis.core.secrets import scrub_url
from metis.core.url_segment import segment as path_segment
from metis.errors import redact


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one adapter's requests go and the headers every one of them carries.

    ``base_url`` may carry a query string (a proxy's ``?key=``): it is kept on every request
    URL, after the path, and its values count among the adapter's ``secrets``."""

    base_url: str
    path: str
    stream_path: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    api_key: str | None = field(default=None, repr=False)
    auth_header: str | None = None
    auth_scheme: str | None = None
    secrets: tuple[str, ...] = field(default=(), init=False, repr=False)
    """The key, secret header values and base-URL query values: hidden from every error,
    telemetry event and log line of a call (:func:`metis.errors.redact`)."""

    def __post_init__(self) -> None:
        found = collect_secrets(self.api_key, self.headers, self.base_url)
        object.__setattr__(self, "secrets", found)

    def __repr__(self) -> str:
        return (
            f"Endpoint({redact(scrub_url(self.base_url), *self.secrets)}{self.path}, "
            f"auth_header={self.auth_header!r}, api_key={'set' if self.api_key else 'none'})"
        )

    def url(self, *, stream: bool, model: str) -> str:
        path = self.stream_path if stream and self.stream_path else self.path
        base, _, query = self.base_url.partition("?")
        url = base.rstrip("/") + path.replace("{model}", path_segment(model))
        if query:
            url += ("&" if "?" in url else "?") + query
        return url

    def request_headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", **self.headers}
        if self.auth_header and self.api_key:
            scheme = f"{self.auth_scheme} " if self.auth_scheme else ""
            headers[self.auth_header] = scheme + self.api_key
        return headers


def without_overlap(base_url: str, path: str) -> str:
    """``base_url`` without a trailing part the path repeats: the SDKs' conventional base URLs
    end in the API version (``OPENAI_BASE_URL=https://host/v1``) that metis's paths start with."""
    base, mark, query = base_url.partition("?")
    base = base.rstrip("/")
    segments = [s for s in path.split("?")[0].split("/") if s]
    for n in range(len(segments) - 1, 0, -1):
        prefix = "/" + "/".join(segments[:n])
        if base.endswith(prefix):
            return base[: -len(prefix)] + mark + query
    return base + mark + query


_VERSION = re.compile(r"v\d+[a-z0-9]*")
"""A path segment naming an API version: ``v1``, ``v4``, ``v1beta``, ``v1beta1``."""


def sdk_root_path(base_url: str, path: str) -> str:
    """``path`` as OpenAI's SDKs join it to a base URL whose path names an API version
    anywhere (Gemini's ``/v1beta/openai``, Z.ai's ``/api/paas/v4``, a gateway's
    ``/v1/acct/gw/openai``): such a base URL is the API's root, so only what follows the path's
    own version segment is appended (``/chat/completions``). A base URL with no version in its
    path, or one that ends where the path begins (``without_overlap``), keeps the whole path."""
    base = base_url.partition("?")[0].rstrip("/")
    if without_overlap(base, path) != base:
        return path
    if not any(_VERSION.fullmatch(s) for s in urlsplit(base).path.split("/")):
        return path
    segments = path.split("/")
    for n, segment in enumerate(segments):
        if _VERSION.fullmatch(segment):
            return "/" + "/".join(segments[n + 1 :])
    return path
