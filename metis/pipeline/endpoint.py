"""Where one adapter's requests go: its URL, the headers every request carries, its secrets."""

from __future__ import annotations

from dataclasses import dataclass, field

from metis.core.secrets import collect as collect_secrets
from metis.core.secrets import scrub_url
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
        url = base.rstrip("/") + path.replace("{model}", model)
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
    base = base_url.rstrip("/")
    segments = [s for s in path.split("?")[0].split("/") if s]
    for n in range(len(segments) - 1, 0, -1):
        prefix = "/" + "/".join(segments[:n])
        if base.endswith(prefix):
            return base[: -len(prefix)]
    return base
