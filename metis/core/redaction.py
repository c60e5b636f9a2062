"""Secrets hidden from text that leaves metis: an error's message, a log line, a recording.

:func:`redact` hides the secrets it is given in every form they can take in text, anything
shaped like a known API key, and the user:password part of a URL; the errors of
:mod:`metis.errors` store their messages through it.
"""

from __future__ import annotations

import functools
import json
import re
from urllib.parse import quote

from metis.core.surrogates import REPLACEMENT, SURROGATE

__all__ = ["clean_surrogates", "redact", "secret_forms"]


@functools.cache
def _key_patterns() -> re.Pattern[str]:
    return re.compile(
        r"(sk-ant-[A-Za-z0-9_\-]+|sk-[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{20,}"
        r"|(?:gsk|hf|xai|pplx|nvapi|csk|fw)[_\-][A-Za-z0-9_\-]{16,}|ya29\.[0-9A-Za-z_\-]{16,}"
        r"|(?i:bearer)\s+[A-Za-z0-9._\-]{12,})"
    )


@functools.cache
def _url_credentials() -> re.Pattern[str]:
    return re.compile(r"(?<=://)[^/@\s]+@")


_SHORT = 8
"""A secret shorter than this is hidden only where it stands alone (not inside a word), so a
four-letter test key does not blank out every word that contains it."""
_TOKEN_CHARS = r"A-Za-z0-9_\-"


def redact(text: str, *secrets: str | None) -> str:
    """Hide secrets: the given ones (as written, JSON-escaped and percent-encoded), anything
    shaped like a known API key, and the user:password part of a URL. Lone surrogates become
    U+FFFD, so the text can always be printed and encoded."""
    for secret in secrets:
        if secret:
            text = _hide(text, secret)
    text = _url_credentials().sub("[REDACTED]@", text)
    text = _key_patterns().sub("[REDACTED]", text)
    return clean_surrogates(text)


def clean_surrogates(text: str) -> str:
    """``text`` with every lone surrogate as U+FFFD (a provider's word, an error code)."""
    return text if text.isascii() else SURROGATE.sub(REPLACEMENT, text)


def _hide(text: str, secret: str) -> str:
    for form in secret_forms(secret):
        if len(form) >= _SHORT:
            text = text.replace(form, "[REDACTED]")
        elif form in text:
            alone = rf"(?<![{_TOKEN_CHARS}]){re.escape(form)}(?![{_TOKEN_CHARS}])"
            text = re.sub(alone, "[REDACTED]", text)
    return text


def secret_forms(secret: str) -> list[str]:
    """The ways ``secret`` can appear in text: as is, JSON-escaped (``\\/`` and ``\\uXXXX``
    included) and percent-encoded."""
    escaped, plain = json.dumps(secret)[1:-1], secret.encode("utf-8", "surrogatepass")
    forms = {secret, escaped, escaped.replace("/", "\\/"), quote(plain, safe=""), quote(plain)}
    return sorted(forms, key=len, reverse=True)
