"""Errors in each served API's shape, with the status code of their class (docs/gateway.md).

Anthropic: ``{"type": "error", "error": {"type", "message"}, "request_id"}``; OpenAI (both
APIs): ``{"error": {"message", "type", "param", "code"}}``. The official SDKs pick their
exception class from the status, so each error class keeps the status the provider gives it.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from metis.errors import (
    AdapterError,
    ErrorClass,
    InvalidRequestError,
    NotConfiguredError,
    RateLimitError,
)
from metis.gateway.hidden import shown

if TYPE_CHECKING:
    from metis.gateway.sse import BlockWriter

log = logging.getLogger("metis.gateway")


class ModelNotFoundError(InvalidRequestError):
    """A model name the configuration does not have: 404 in every API."""


class PreviousResponseNotFoundError(InvalidRequestError):
    """A ``previous_response_id`` the gateway does not hold."""


class ResponseNotFoundError(InvalidRequestError):
    """A stored Responses id the gateway does not hold for the key asking: 404."""


THREAD_UNSUPPORTED = "thread_unsupported_request"


class ThreadUnsupportedError(InvalidRequestError):
    """An Anthropic request naming a message thread (``thread``), which the gateway does not
    hold: 400 with ``error.details.error_code`` ``thread_unsupported_request``, on which the
    SDK's tool runner sends the whole conversation again, without ``thread``."""


class RequestTooLargeError(InvalidRequestError):
    """A body over the configured size limit: 413."""


class HeadTooLargeError(InvalidRequestError):
    """A request line and headers longer than the server reads: 431."""


class RouteNotFoundError(InvalidRequestError):
    """A path the gateway does not serve: 404."""


class MethodNotAllowedError(InvalidRequestError):
    """A served path asked with another method than its own: 405."""


class RequestTimeoutError(InvalidRequestError):
    """A request whose body did not arrive within the per-request timeout: 408."""


BODY_LATE = "metis.body_late"
"""The key of a request's ASGI scope under which ``metis serve``'s protocol says why it
refused the body for its time (metis.gateway.http_head): the application then reads the body's
end as that 408, not as a client gone."""


class GatewayAuthError(AdapterError):
    """A missing or wrong gateway key: 401."""

    error_class = ErrorClass.AUTH


class GatewayPermissionError(AdapterError):
    """A gateway key naming a model it may not use: 403."""

    error_class = ErrorClass.AUTH


class BudgetExceededError(RateLimitError):
    """A key's budget is spent: 429 ``insufficient_quota``, as OpenAI answers a spent quota;
    counted in ``/metrics`` as :data:`BUDGET`, apart from the rate limits."""

    error_class = ErrorClass.RATE_LIMIT


def out_of_credit(error: AdapterError) -> bool:
    """Whether ``error`` says an account cannot pay (a key's budget, or an upstream account
    out of credit: metis/wire/out_of_credit.py), a rate limit no wait mends: OpenAI's
    ``insufficient_quota``, and ``x-should-retry: false`` in either API."""
    return error.error_class is ErrorClass.RATE_LIMIT and not error.retryable


BUDGET = "budget"
"""The ``error_class`` ``/metrics`` counts a key's budget refusal under."""


class SharedStoreError(AdapterError):
    """The Redis the gateway shares its keys' limits and spend and its stored responses
    through did not answer: 529 (Anthropic) or 503 (OpenAI), retried by the SDKs, rather than
    serving a key whose limits and budget cannot be checked."""

    error_class = ErrorClass.OVERLOADED


def shared_store_failed(doing: str, exc: Exception) -> SharedStoreError:
    """The error of a shared store (Redis) that failed while the gateway was ``doing``: the
    cause is logged here, for the operator; the caller is told only what could not be done
    (the store's address is not theirs to see)."""
    log.warning(
        "gateway shared store failed (%s: %s): could not %s",
        type(exc).__name__,
        exc,
        doing,
        extra={"event": "metis.gateway.store_failed"},
    )
    message = f"the gateway's shared store is unavailable; it could not {doing}"
    return SharedStoreError(message, retry_after_seconds=1.0)


class KeyRateLimitError(RateLimitError):
    """A gateway key over its ``requests_per_minute``: 429 with ``retry-after``, and the
    limit said in each API's own rate-limit headers (``x-ratelimit-*-requests``,
    ``anthropic-ratelimit-requests-*``), as the provider says its own."""

    def __init__(self, message: str, *, limit: int, retry_after_seconds: float) -> None:
        super().__init__(message, retry_after_seconds=retry_after_seconds)
        self.limit = limit


def _limit_headers(error: AdapterError, api: str) -> dict[str, str]:
    """A key's rate limit as ``api``'s headers: its limit, none remaining, and when one is
    (OpenAI: a duration, ``12s``; Anthropic: the time, RFC 3339)."""
    if not isinstance(error, KeyRateLimitError):
        return {}
    wait = math.ceil(max(0.0, error.retry_after_seconds or 0.0))
    if api == "anthropic":
        at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=wait)
        return {
            "anthropic-ratelimit-requests-limit": str(error.limit),
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": at.isoformat().replace("+00:00", "Z"),
        }
    return {
        "x-ratelimit-limit-requests": str(error.limit),
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": f"{wait}s",
    }


class GatewayTimeoutError(AdapterError):
    """The request ran past the configured per-request timeout: 504."""

    error_class = ErrorClass.SERVER_ERROR


REQUEST_TIMEOUT = "gateway.request_timeout_seconds"


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """How long a request may run, and the setting that says so (docs/gateway.md)."""

    seconds: float
    setting: str = REQUEST_TIMEOUT

    def exceeded(self) -> GatewayTimeoutError:
        """The 504 of a request that ran past it, naming it."""
        return GatewayTimeoutError(
            f"the request took longer than the gateway allows: {self.seconds:g} s ({self.setting})"
        )


@dataclass(slots=True)
class ErrorReply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


_ANTHROPIC: dict[ErrorClass, tuple[int, str]] = {
    ErrorClass.RATE_LIMIT: (429, "rate_limit_error"),
    ErrorClass.OVERLOADED: (529, "overloaded_error"),
    ErrorClass.AUTH: (401, "authentication_error"),
    ErrorClass.SERVER_ERROR: (500, "api_error"),
    ErrorClass.NETWORK: (502, "api_error"),
    ErrorClass.CONTEXT_OVERFLOW: (400, "invalid_request_error"),
    ErrorClass.INVALID_REQUEST: (400, "invalid_request_error"),
    ErrorClass.CAPABILITY: (400, "invalid_request_error"),
    ErrorClass.CANCELLED: (499, "api_error"),
    ErrorClass.OTHER: (500, "api_error"),
}
_OPENAI: dict[ErrorClass, tuple[int, str, str | None]] = {
    ErrorClass.RATE_LIMIT: (429, "requests", "rate_limit_exceeded"),
    ErrorClass.OVERLOADED: (503, "server_error", None),
    ErrorClass.AUTH: (401, "invalid_request_error", "invalid_api_key"),
    ErrorClass.SERVER_ERROR: (500, "server_error", None),
    ErrorClass.NETWORK: (502, "server_error", None),
    ErrorClass.CONTEXT_OVERFLOW: (400, "invalid_request_error", "context_length_exceeded"),
    ErrorClass.INVALID_REQUEST: (400, "invalid_request_error", None),
    ErrorClass.CAPABILITY: (400, "invalid_request_error", "unsupported_value"),
    ErrorClass.CANCELLED: (499, "server_error", None),
    ErrorClass.OTHER: (500, "server_error", None),
}


PROVIDER_KEY_MISSING = "provider_key_missing"
PROVIDER_KEY_REFUSED = "provider_key_refused"


def provider_key_failure(error: AdapterError) -> AdapterError:
    """``error``, or, when it is the gateway's own provider credentials that failed (not set
    here, or refused by the provider), the gateway's fault said as such: a 500 (not set) or
    502 (refused), never retried, rather than the provider's 401 or 403, which a client's SDK
    or agent reads as its own key being wrong. The cause goes to the log; the caller's message
    names it without the provider's text (which may echo part of the key)."""
    code = _provider_key_code(error)
    if code is None or isinstance(error, ProviderKeyError):
        return error
    provider = error.provider or "the provider"
    if isinstance(error, NotConfiguredError):
        whom = provider if error.model is not None else "any model of this route"
        cause = f"the gateway has no credentials configured for {whom}"
    else:
        status = f" (HTTP {error.provider_status})" if error.provider_status else ""
        cause = f"{provider} refused the gateway's own credentials{status}"
    log.error(
        "gateway provider credentials failed: %s",
        error,
        extra={"event": "metis.gateway.provider_key", "error_code": code},
    )
    return ProviderKeyError(
        f"{cause}; your key for this gateway was accepted: the gateway's operator must "
        "fix its provider credentials",
        provider_code=code,
        provider_status=error.provider_status,
        provider=error.provider,
        request_id=error.request_id,
        retryable=False,
    )


class ProviderKeyError(AdapterError):
    """The gateway's own provider credentials are missing (500) or refused upstream (502)."""

    error_class = ErrorClass.SERVER_ERROR


def _provider_key_code(error: AdapterError) -> str | None:
    """``provider_key_missing`` or ``provider_key_refused`` when ``error`` is the gateway's own
    provider credentials failing (None: it is not)."""
    if isinstance(error, ProviderKeyError):
        return error.provider_code
    if error.error_class is not ErrorClass.AUTH or isinstance(
        error, GatewayAuthError | GatewayPermissionError
    ):
        return None
    return PROVIDER_KEY_MISSING if isinstance(error, NotConfiguredError) else PROVIDER_KEY_REFUSED


def metric_class(error: AdapterError | str) -> str:
    """The ``error_class`` ``/metrics`` counts ``error`` under (docs/gateway.md "Metrics"):
    its metis error class, but the gateway's own provider credentials failing are
    ``provider_key_missing`` or ``provider_key_refused``, never the caller's ``auth``, and a
    key's spent budget is ``budget``, not a rate limit. A string is a class already (a
    provider's in-stream error event, the gateway's ``other``)."""
    if isinstance(error, str):
        return error
    if isinstance(error, BudgetExceededError):
        return BUDGET
    return _provider_key_code(error) or error.error_class.value


def _special(error: AdapterError) -> tuple[int, str, str | None] | None:
    """Status, Anthropic type and OpenAI code of the gateway's own errors."""
    if isinstance(error, ProviderKeyError):
        missing = error.provider_code == PROVIDER_KEY_MISSING
        return (500 if missing else 502), "api_error", error.provider_code
    if isinstance(error, ModelNotFoundError):
        return 404, "not_found_error", "model_not_found"
    if isinstance(error, PreviousResponseNotFoundError):
        return 400, "invalid_request_error", "previous_response_not_found"
    if isinstance(error, RouteNotFoundError | ResponseNotFoundError):
        return 404, "not_found_error", None
    if isinstance(error, MethodNotAllowedError):
        return 405, "invalid_request_error", None
    if isinstance(error, RequestTimeoutError):
        return 408, "timeout_error", "request_timeout"
    if isinstance(error, RequestTooLargeError):
        return 413, "request_too_large", "request_too_large"
    if isinstance(error, HeadTooLargeError):
        return 431, "invalid_request_error", "request_header_fields_too_large"
    if isinstance(error, GatewayTimeoutError):
        return 504, "timeout_error", "timeout"
    if isinstance(error, GatewayPermissionError):
        return 403, "permission_error", "model_not_allowed"
    return None


def _headers(error: AdapterError, status: int) -> dict[str, str]:
    """``retry-after`` when the error has a delay; ``x-should-retry`` where the official SDKs
    retry by status alone (408, 409, 429, 5xx), saying what the error says: an upstream's
    ``x-should-retry: false`` or an exhausted quota is not retried by the caller's SDK either."""
    headers: dict[str, str] = {}
    if error.retry_after_seconds is not None:  # whole seconds, as RFC 9110 writes a delay
        headers["retry-after"] = str(math.ceil(max(0.0, error.retry_after_seconds)))
    if status in (408, 409, 429) or status >= 500:
        headers["x-should-retry"] = "true" if error.retryable else "false"
    return headers


def anthropic_error(error: AdapterError, request_id: str) -> ErrorReply:
    error = provider_key_failure(error)
    special = _special(error)
    status, kind = (special[0], special[1]) if special else _ANTHROPIC[error.error_class]
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": shown(error)}}
    if isinstance(error, ThreadUnsupportedError) or error.provider_code == THREAD_UNSUPPORTED:
        body["error"]["details"] = {"error_code": THREAD_UNSUPPORTED}  # the provider's too
    headers = {**_headers(error, status), **_limit_headers(error, "anthropic")}
    headers["request-id"] = request_id
    return ErrorReply(status, {**body, "request_id": request_id}, headers)


_PARAMS: WeakKeyDictionary[AdapterError, str] = WeakKeyDictionary()
"""The field a passed-through provider's refusal named (its ``error.param``), by error."""


def carry_param(error: AdapterError, body: Any) -> AdapterError:
    """``error``, to be said with the ``param`` an OpenAI-shaped refusal ``body`` (parsed)
    names: passed through, the provider's field is the client's own."""
    found = body.get("error") if isinstance(body, dict) else None
    param = found.get("param") if isinstance(found, dict) else None
    if isinstance(param, str) and param:
        _PARAMS[error] = param
    return error


_FIELD = re.compile(r"([A-Za-z_]\w*(?:\[\d+\]|\.[A-Za-z_]\w*)*): ")
"""A field's path (``tools[0].function``) at the start of a refusal's message."""


def openai_error(error: AdapterError, request_id: str, param: str | None = None) -> ErrorReply:
    error = provider_key_failure(error)
    special = _special(error)
    if special:
        status, kind, code = special[0], "invalid_request_error", special[2]
        if status >= 500:
            kind = "server_error"
    else:
        status, kind, code = _OPENAI[error.error_class]
        if out_of_credit(error):  # as OpenAI answers a spent quota, whoever's it is
            kind = code = "insufficient_quota"
    if isinstance(error, PreviousResponseNotFoundError):
        param = "previous_response_id"
    elif param is None and error in _PARAMS:
        param = _PARAMS[error]
    elif param is None and error.provider is None and isinstance(error, InvalidRequestError):
        named = _FIELD.match(error.message)  # the gateway's readers say "field: what is wrong"
        param = named[1] if named else None
    body = {"error": {"message": shown(error), "type": kind, "param": param, "code": code}}
    headers = {**_headers(error, status), **_limit_headers(error, "openai")}
    return ErrorReply(status, body, {**headers, "x-request-id": request_id})


def error_reply(api: str, error: AdapterError, request_id: str) -> ErrorReply:
    if api == "anthropic":
        return anthropic_error(error, request_id)
    return openai_error(error, request_id)


class Ending:
    """Called with an error: the bytes that end a translated stream the gateway cuts with
    it; :meth:`ended`: whether the writer made the stream's end already (one small object a
    stream in flight, not two closures)."""

    __slots__ = ("_api", "_request_id", "_writer")

    def __init__(self, api: str, request_id: str, writer: BlockWriter) -> None:
        self._api, self._request_id, self._writer = api, request_id, writer

    def __call__(self, error: AdapterError) -> bytes:
        reply = error_reply(self._api, error, self._request_id)
        return self._writer.error(reply.status, reply.body)

    def ended(self) -> bool:
        return self._writer.ended
