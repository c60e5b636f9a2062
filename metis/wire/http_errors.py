"""The HTTP side of error classification, shared by every codec (docs/contract.md §4).

Codecs read their provider's error body and pass what they found here; the status mapping,
the context-overflow wording and the Retry-After parsing live in this one place.
"""

from __future__ import annotations

import base64
import datetime
import functools
import math
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from metis.errors import AdapterError, AuthError, ErrorClass, error_for
from metis.wire import json_limits
from metis.wire.compressed import undeclared_compression
from metis.wire.out_of_credit import cannot_pay


@functools.cache
def _overflow() -> re.Pattern[str]:
    return re.compile(
        r"context[ _]length|context window|maximum context|too many tokens|prompt is too long"
        r"|input is too long|reduce the length|exceeds? the (model'?s? )?(context|maximum"
        r" (allowed )?(number of )?(tokens?|bytes|context|input|prompt|length))"
        r"|request_too_large|tokens? (limit|exceed)|exceeds the available context"
        r"|maximum prompt length|too many total text bytes",  # xAI's, Anthropic's
        re.IGNORECASE,
    )


@functools.cache
def _bad_key_text() -> re.Pattern[str]:
    return re.compile(r"\b(incorrect|invalid) api key\b|\bapi key not valid\b", re.IGNORECASE)


@functools.cache
def _file_gone_text() -> re.Pattern[str]:
    # The Gemini API's 403 for a file of its Files API it no longer has (a file expires 48
    # hours after its upload): "You do not have permission to access the File x or it may not
    # exist." (PERMISSION_DENIED): the request names a file that is gone, not a refused key.
    return re.compile(r"\baccess the file\b.*\bmay not exist\b", re.IGNORECASE)


@functools.cache
def _overloaded_text() -> re.Pattern[str]:
    return re.compile(r"overloaded|over capacity|capacity", re.IGNORECASE)


def class_for_status(status: int) -> ErrorClass:
    if status in (401, 403):
        return ErrorClass.AUTH
    if status == 408:
        return ErrorClass.NETWORK
    if status == 413:
        return ErrorClass.CONTEXT_OVERFLOW
    if status == 429:
        return ErrorClass.RATE_LIMIT
    if status == 529:
        return ErrorClass.OVERLOADED
    if status >= 500:
        return ErrorClass.SERVER_ERROR
    if status >= 400:
        return ErrorClass.INVALID_REQUEST
    return ErrorClass.OTHER


def sdk_retries(status: int) -> bool:
    """Whether OpenAI's and Anthropic's SDKs retry an answer with this status, whatever its
    body says: 408, 409 (a lock timeout), 429 and every 5xx (their ``_should_retry``)."""
    return status in (408, 409, 429) or status >= 500


def says_context_overflow(message: str) -> bool:
    return bool(_overflow().search(message))


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's hint: ``retry-after-ms``, ``retry-after`` in seconds or as an HTTP date
    (one in the past: 0). A number that is not a finite one of at least 0 (``-5``, ``nan``,
    ``inf``) is no hint: the retry's own backoff applies, as the official SDKs do."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := lowered.get("retry-after-ms")) is not None:
        try:
            seconds = delay_seconds(float(ms) / 1000)
        except ValueError:
            seconds = None
        if seconds is not None:
            return seconds
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return delay_seconds(float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # asctime's form, or -0000: GMT, as every HTTP date (RFC 9110)
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def server_says_retry(headers: Mapping[str, str]) -> bool | None:
    """``x-should-retry: true`` or ``false``: whether the server asks for the request to be
    sent again, over what its status says (Anthropic and OpenAI send it; their SDKs obey
    it); None when it says neither."""
    for key, value in headers.items():
        if key.lower() == "x-should-retry":
            return {"true": True, "false": False}.get(value.strip().lower())
    return None


def delay_seconds(value: float) -> float | None:
    """A provider's delay, in seconds, when it is one (finite, not negative); else None."""
    return value if math.isfinite(value) and value >= 0 else None


def json_body(body: bytes) -> dict[str, Any] | None:
    try:
        value = json_limits.loads(body)
    except ValueError:  # invalid JSON or UTF-8, NaN, nesting too deep: no JSON error body
        return None
    return value if isinstance(value, dict) else None


def body_excerpt(body: bytes, limit: int = 300) -> str:
    if compressed := undeclared_compression(body):
        return compressed
    text = body.decode("utf-8", errors="replace").strip()
    if text.lstrip().lower().startswith(("<!doctype", "<html")):
        title = re.search(r"<title>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        return f"HTML error page: {title.group(1).strip() if title else text[:80]}"
    return text[:limit] + ("..." if len(text) > limit else "")


def http_error(
    status: int | None,
    headers: Mapping[str, str],
    message: str,
    *,
    error_class: ErrorClass | None = None,
    code: str | None = None,
    request_id: str | None = None,
    retryable: bool | None = None,
    provider: str | None = None,
    retried_by_status: bool = False,
) -> AdapterError:
    """Build the error a provider reported, with an HTTP status or (inside a 200 stream) none.

    ``error_class`` from the body wins over the status mapping, except that a 401 or 403 is
    always ``auth`` (OpenAI-compatible servers answer a bad key with a 401 typed
    ``invalid_request_error``), and so is an invalid request saying its API key is incorrect or
    invalid (xAI's 400); with neither, an error inside a stream is a server error. A
    503, or an error inside a stream, that is a server error saying it is overloaded is
    ``overloaded``, and an invalid request whose text says the context is too long is a
    context overflow. An error saying the account cannot pay (out of credit, past a spend
    limit: :func:`~metis.wire.out_of_credit.cannot_pay`) is a ``rate_limit`` never retried.

    ``retried_by_status``: the provider's own SDK retries by status (:func:`sdk_retries`), so
    such a status whose body names only an invalid request is classified by its status, a 409
    as a server error (the provider's lock conflict, gone on a later attempt).
    """
    cls = error_class or (class_for_status(status) if status else ErrorClass.SERVER_ERROR)
    if retried_by_status and status and sdk_retries(status) and cls is ErrorClass.INVALID_REQUEST:
        cls = ErrorClass.SERVER_ERROR if status == 409 else class_for_status(status)
    said = server_says_retry(headers)
    if said is not None:
        retryable = said
    cls = _as_its_words_say(cls, status, message)
    if cannot_pay(status, code, message):  # out of credit: no wait mends it (out_of_credit.py)
        cls, retryable = ErrorClass.RATE_LIMIT, False
    error = error_for(
        cls,
        message or (f"HTTP {status} with an empty body" if status else "an error with no message"),
        provider=provider,
        provider_status=status,
        provider_message=message,
        provider_code=code,
        request_id=request_id,
        retry_after_seconds=retry_after_seconds(headers),
        retryable=retryable,
    )
    if status == 401 and isinstance(error, AuthError):
        error.claims = claims_challenge(headers)
    return error


def _as_its_words_say(cls: ErrorClass, status: int | None, message: str) -> ErrorClass:
    """``cls`` corrected by what the status and the message say (see :func:`http_error`)."""
    if status in (401, 403) or (
        cls is ErrorClass.INVALID_REQUEST and _bad_key_text().search(message)
    ):
        cls = ErrorClass.AUTH  # xAI answers a wrong key with a 400 that says so
    if status == 403 and _file_gone_text().search(message):
        cls = ErrorClass.INVALID_REQUEST
    overloaded = cls is ErrorClass.SERVER_ERROR and _overloaded_text().search(message)
    if status in (503, None) and overloaded:  # (OpenAI's: type server_error, said overloaded)
        cls = ErrorClass.OVERLOADED
    if cls is ErrorClass.INVALID_REQUEST and says_context_overflow(message):
        cls = ErrorClass.CONTEXT_OVERFLOW
    return cls


def claims_challenge(headers: Mapping[str, str]) -> str | None:
    """The claims a 401's ``WWW-Authenticate: Bearer ... error="insufficient_claims",
    claims="<base64>"`` asks for (Continuous Access Evaluation), decoded; None without one,
    or with claims that do not decode."""
    challenge = next((v for k, v in headers.items() if k.lower() == "www-authenticate"), "")
    said = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    encoded = said.get("claims", "")
    if said.get("error") != "insufficient_claims" or not encoded:
        return None
    try:
        decoded = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded or None


def own_status(error: Any) -> int | None:
    """The HTTP status an error object in a 200 reply says it is (``status``, or a numeric
    ``code``: Azure's, OpenRouter's), for it to be classified as that status would be."""
    if not isinstance(error, dict):
        return None
    for field in ("status", "code"):
        value = error.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
            return value
    return None


def openai_error_fields(data: Any) -> tuple[str, str | None, str | None] | None:
    """``(message, code, type)`` from an OpenAI-shaped error: ``{"error": {...}}``,
    ``{"error": "..."}``, vLLM's flat ``{"object": "error", ...}`` or a Responses ``error``
    stream event (its fields at the top level); None when ``data`` holds none of these."""
    if not isinstance(data, dict):
        return None
    flat = data.get("object") == "error" or data.get("type") == "error"
    error = data.get("error") or (data if flat else None)
    if isinstance(error, str):  # xAI's {"code": "invalid-argument", "error": "..."}
        code = data.get("code")
        return error, None if code is None else str(code), None
    if not isinstance(error, dict):
        return None
    code, kind = error.get("code"), error.get("type")
    if kind == "error":  # the event's own type, not an error type
        kind = None
    message = str(error.get("message") or "")
    return message, None if code is None else str(code), None if kind is None else str(kind)


def openai_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    classify: Callable[..., AdapterError],
) -> AdapterError:
    """An error answer of an OpenAI API (Chat, Responses): its message, code and type as
    :func:`openai_error_fields` reads them (a body of another shape, a proxy's HTML or none:
    its excerpt), its ``x-request-id``, classified by the API's own ``classify(status,
    headers, message, code, type, request_id=...)``."""
    data = json_body(body)
    info = openai_error_fields(data) if data is not None else None
    if info is None:
        info = (body_excerpt(body) if body.strip() else "", None, None)
    request_id = next((v for k, v in headers.items() if k.lower() == "x-request-id"), None)
    return classify(status, headers, *info, request_id=request_id)
