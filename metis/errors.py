"""Classified errors (docs/contract.md §4).

Every failure that leaves metis is an :class:`AdapterError` carrying its :class:`ErrorClass`;
nothing escapes as a bare ``KeyError`` or ``httpx`` exception. Messages are redacted of
anything that looks like an API key before they are stored (:mod:`metis.core.redaction`, whose
``redact`` and ``secret_forms`` are importable from here too).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from metis.core.redaction import clean_surrogates, redact, secret_forms

if TYPE_CHECKING:
    from metis.model.embeddings import PartialEmbeddings
    from metis.model.response import CanonicalResponse

__all__ = [
    "ERROR_TYPES",
    "RETRYABLE",
    "RETRY_POLICY",
    "AdapterError",
    "AuthError",
    "BlockingCallError",
    "CancelledError",
    "CapabilityError",
    "ClosedError",
    "ConfigError",
    "ContextOverflowError",
    "ErrorClass",
    "InputTooLongError",
    "InvalidRequestError",
    "InvariantViolation",
    "NetworkError",
    "NotConfiguredError",
    "OutputValidationError",
    "OverloadedError",
    "ProtocolError",
    "RateLimitError",
    "RedirectError",
    "RetryPolicy",
    "ServerError",
    "StackError",
    "error_for",
    "redact",
    "scrub_error",
    "secret_forms",
]


class ErrorClass(StrEnum):
    """The classes every failure falls into (docs/contract.md §4); retries follow the class."""

    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    AUTH = "auth"
    SERVER_ERROR = "server_error"
    NETWORK = "network"
    CONTEXT_OVERFLOW = "context_overflow"
    INVALID_REQUEST = "invalid_request"
    CAPABILITY = "capability"
    CANCELLED = "cancelled"
    OTHER = "other"


def scrub_error(error: BaseException, secrets: tuple[str, ...]) -> BaseException:
    """Hide ``secrets`` from an error already raised (its message, its provider's message,
    and the text of every exception chained to it); returns the same error."""
    if not secrets:
        return error
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, AdapterError):
            current.message = redact(current.message, *secrets)
            current.provider_message = redact(current.provider_message, *secrets)
        current.args = tuple(
            redact(arg, *secrets) if isinstance(arg, str) else arg for arg in current.args
        )
        current = current.__cause__ or current.__context__
    return error


class AdapterError(Exception):
    """Base of every error metis raises for a call."""

    error_class: ErrorClass = ErrorClass.OTHER

    def __init__(
        self,
        message: str,
        *,
        provider_status: int | None = None,
        provider_message: str | None = None,
        provider_code: str | None = None,
        retryable: bool | None = None,
        request_id: str | None = None,
        retry_after_seconds: float | None = None,
        provider: str | None = None,
    ) -> None:
        self.message = redact(message)
        self.provider_status = provider_status
        self.provider_message = redact(provider_message if provider_message is not None else "")
        self.provider_code = (
            clean_surrogates(provider_code) if isinstance(provider_code, str) else provider_code
        )
        self.retryable = RETRYABLE[self.error_class] if retryable is None else retryable
        self.request_id = (
            clean_surrogates(request_id) if isinstance(request_id, str) else request_id
        )
        self.retry_after_seconds = retry_after_seconds
        self.provider = provider
        self.partial_response: CanonicalResponse | None = None
        """For ``complete()``: what arrived before the failure, when anything did."""
        self.partial_embeddings: PartialEmbeddings | None = None
        """For an embedding call: every vector that arrived, and which items failed."""
        self.partial_results: Any = None  # a batch's results: the items read (a BatchResults)
        super().__init__(self.message)

    def __str__(self) -> str:
        where = f"{self.provider} " if self.provider else ""
        status = f" (HTTP {self.provider_status})" if self.provider_status else ""
        message = self.message
        if self.provider and message.startswith(f"{self.provider}: "):
            message = message[len(self.provider) + 2 :]  # said once, in front
        return f"{where}{self.error_class.value}{status}: {message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.error_class.value!r}, {self.message!r})"

    def describe(self) -> dict[str, Any]:
        """The error's fields as JSON-ready data, for a log line or an API answer."""
        return {
            "error_class": self.error_class.value,
            "message": self.message,
            "provider": self.provider,
            "provider_status": self.provider_status,
            "provider_code": self.provider_code,
            "provider_message": self.provider_message,
            "retryable": self.retryable,
            "request_id": self.request_id,
            "retry_after_seconds": self.retry_after_seconds,
        }


class RateLimitError(AdapterError):
    """The provider's rate limit (429, throttling). Retried, honouring Retry-After."""

    error_class = ErrorClass.RATE_LIMIT


class OverloadedError(AdapterError):
    """The provider is overloaded (Anthropic 529, 503 UNAVAILABLE). Retried, backing off
    longer than for a rate limit."""

    error_class = ErrorClass.OVERLOADED


class AuthError(AdapterError):
    """The provider refused the credentials (401, 403, an expired token). Not retried."""

    error_class = ErrorClass.AUTH
    claims: str | None = None
    """The claims a 401's ``WWW-Authenticate`` challenge asks a new token to carry
    (``error="insufficient_claims"``: Microsoft Entra ID's Continuous Access Evaluation),
    decoded; None when it asks none."""


class ServerError(AdapterError):
    """The provider failed (500, 502, an in-stream server error). Retried."""

    error_class = ErrorClass.SERVER_ERROR


class NetworkError(AdapterError):
    """The connection failed, timed out or was cut short. Retried while no event has reached
    the caller."""

    error_class = ErrorClass.NETWORK


class ContextOverflowError(AdapterError):
    """The input is longer than the model's context window. Not retried."""

    error_class = ErrorClass.CONTEXT_OVERFLOW


class InvalidRequestError(AdapterError):
    """The provider refused the request as invalid (400), or metis found, before sending,
    what it would refuse. Not retried."""

    error_class = ErrorClass.INVALID_REQUEST


class CapabilityError(AdapterError):
    """The model cannot serve the request (images, tools, thinking, an output limit, ...),
    found before anything was sent. Not retried."""

    error_class = ErrorClass.CAPABILITY


class InputTooLongError(ContextOverflowError, CapabilityError):
    """The input is over the model's context window, found before anything was sent: a
    ``ContextOverflowError`` (class ``context_overflow``), as the provider's own refusal of it
    is, and a ``CapabilityError``, as every other need the model cannot meet is."""

    error_class = ErrorClass.CONTEXT_OVERFLOW


class CancelledError(AdapterError):
    """The call was cancelled (``Adapter.cancel``). A stream ends with ``message.complete``
    (stop reason ``cancelled``) before this is raised, so what arrived is kept."""

    error_class = ErrorClass.CANCELLED


class RedirectError(AdapterError):
    """The provider's answer was a redirect metis would not follow: to another origin (the
    API key would go there), in a loop, or with a client that follows none."""

    error_class = ErrorClass.OTHER


class ClosedError(AdapterError):
    """A call on an adapter after its ``aclose()``, or through an HTTP client its owner has
    closed: nothing is sent. Build a new adapter (or give it an open client). Not retried."""

    error_class = ErrorClass.OTHER


class ProtocolError(AdapterError):
    """The provider sent something that does not follow its own wire format."""

    error_class = ErrorClass.OTHER


class InvariantViolation(AdapterError):
    """The canonical event stream broke a rule of docs/contract.md §2"""

    error_class = ErrorClass.OTHER


class OutputValidationError(AdapterError):
    """The model's reply does not validate against the output type asked for; the reply is on
    ``partial_response`` and its text on ``raw_text``."""

    error_class = ErrorClass.OTHER

    def __init__(self, message: str, *, raw_text: str = "", **details: Any) -> None:
        super().__init__(message, **details)
        self.raw_text = raw_text


ERROR_TYPES: dict[ErrorClass, type[AdapterError]] = {
    ErrorClass.RATE_LIMIT: RateLimitError,
    ErrorClass.OVERLOADED: OverloadedError,
    ErrorClass.AUTH: AuthError,
    ErrorClass.SERVER_ERROR: ServerError,
    ErrorClass.NETWORK: NetworkError,
    ErrorClass.CONTEXT_OVERFLOW: ContextOverflowError,
    ErrorClass.INVALID_REQUEST: InvalidRequestError,
    ErrorClass.CAPABILITY: CapabilityError,
    ErrorClass.CANCELLED: CancelledError,
    ErrorClass.OTHER: AdapterError,
}


class RetryPolicy(NamedTuple):
    retry: bool
    base_delay: float = 0.0
    max_delay: float = 0.0


# The retry contract (docs/contract.md §4), in one place. Transient classes are retried
# with exponential backoff from base_delay (doubling each attempt, plus up to 25% jitter),
# capped at max_delay; a provider's Retry-After wins when it sends one (capped at 60 s).
# Overloaded backs off longer than rate_limit: the provider is struggling, and piling on
# makes it worse.
RETRY_POLICY: dict[ErrorClass, RetryPolicy] = {
    ErrorClass.RATE_LIMIT: RetryPolicy(True, base_delay=1.0, max_delay=30.0),
    ErrorClass.OVERLOADED: RetryPolicy(True, base_delay=2.0, max_delay=60.0),
    ErrorClass.SERVER_ERROR: RetryPolicy(True, base_delay=1.0, max_delay=30.0),
    ErrorClass.NETWORK: RetryPolicy(True, base_delay=1.0, max_delay=30.0),
    ErrorClass.AUTH: RetryPolicy(False),
    ErrorClass.CONTEXT_OVERFLOW: RetryPolicy(False),
    ErrorClass.INVALID_REQUEST: RetryPolicy(False),
    ErrorClass.CAPABILITY: RetryPolicy(False),
    ErrorClass.CANCELLED: RetryPolicy(False),
    ErrorClass.OTHER: RetryPolicy(False),
}
MAX_RETRY_AFTER_SECONDS = 60.0
RETRYABLE: dict[ErrorClass, bool] = {cls: policy.retry for cls, policy in RETRY_POLICY.items()}


def error_for(error_class: ErrorClass, message: str, **details: Any) -> AdapterError:
    """The most specific exception for ``error_class``."""
    return ERROR_TYPES[error_class](message, **details)


class BlockingCallError(RuntimeError):
    """A synchronous form (``metis.complete``, ``Session.send``, ...) refused where waiting for
    the reply would deadlock: on metis's own event loop, or with a ``Router`` inside a running
    event loop (docs/calls.md). The message gives the async form to use instead."""


class ConfigError(ValueError):
    """A stack, stage option or registry file is wrong; says which file, key and why."""


class StackError(ConfigError):
    """A pipeline whose stages do not fit together; names the stage and the reason."""


class NotConfiguredError(AuthError, ConfigError):
    """A call whose provider is not configured: no API key, credentials, region, project or
    resource where one is needed (docs/models-yaml.md, docs/cloud.md). Raised when the call is
    made, before anything is sent; the message names what to set.

    An :class:`AuthError` (class ``auth``: never retried, no fallback by default) like every
    other call-time failure. It is also a :class:`ConfigError`, which it was before; catching
    it as one is deprecated and stops working in the next release."""

    def __init__(
        self,
        message: str,
        *,
        model: str | None,
        adapter: str,
        api_key_env: str | None,
        **details: Any,
    ) -> None:
        super().__init__(message, provider=details.pop("provider", adapter), **details)
        self.model = model
        self.adapter = adapter
        """The adapter (the stack, or the models.yaml entry) that is not configured."""
        self.api_key_env = api_key_env
        """The environment variable to set, where there is one."""
