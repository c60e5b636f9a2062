"""AWS's error answers, classified: HTTP error bodies and event-stream exception frames.

AWS names every error by an exception type: in an HTTP answer the ``x-amzn-ErrorType``
header (``ThrottlingException:http://internal.amazon.com/...``) or the body's ``__type``,
inside an event stream the ``:exception-type`` header (camelCase there:
``throttlingException``). The message is the body's ``message`` (``Message`` for some
services). Bedrock's list is in its API reference under "Errors" of Converse, ConverseStream
and InvokeModel; the authentication ones are common to every AWS service.
"""

from __future__ import annotations

from collections.abc import Mapping

from metis.errors import AdapterError, ErrorClass
from metis.wire.http_errors import body_excerpt, http_error, json_body

# Lower-cased exception type -> (class, retryable or None for the class's default).
_EXCEPTIONS: dict[str, tuple[ErrorClass, bool | None]] = {
    "throttlingexception": (ErrorClass.RATE_LIMIT, None),
    "toomanyrequestsexception": (ErrorClass.RATE_LIMIT, None),
    # An account quota, not a momentary rate: waiting does not help.
    "servicequotaexceededexception": (ErrorClass.RATE_LIMIT, False),
    "serviceunavailableexception": (ErrorClass.OVERLOADED, None),
    "modelnotreadyexception": (ErrorClass.OVERLOADED, None),
    "modelstreamerrorexception": (ErrorClass.SERVER_ERROR, None),
    "modelerrorexception": (ErrorClass.SERVER_ERROR, None),
    "modeltimeoutexception": (ErrorClass.SERVER_ERROR, None),
    "internalserverexception": (ErrorClass.SERVER_ERROR, None),
    "internalfailure": (ErrorClass.SERVER_ERROR, None),
    "validationexception": (ErrorClass.INVALID_REQUEST, None),
    "resourcenotfoundexception": (ErrorClass.INVALID_REQUEST, None),
    "conflictexception": (ErrorClass.INVALID_REQUEST, None),
    "serializationexception": (ErrorClass.INVALID_REQUEST, None),
    "accessdeniedexception": (ErrorClass.AUTH, None),
    "expiredtokenexception": (ErrorClass.AUTH, None),
    "unrecognizedclientexception": (ErrorClass.AUTH, None),
    "invalidsignatureexception": (ErrorClass.AUTH, None),
    "incompletesignatureexception": (ErrorClass.AUTH, None),
    "missingauthenticationtokenexception": (ErrorClass.AUTH, None),
    "signaturedoesnotmatch": (ErrorClass.AUTH, None),
}


def exception_type(headers: Mapping[str, str], data: Mapping[str, object] | None) -> str | None:
    """The exception type of an HTTP error answer, without its namespace or URL parts."""
    raw = next((v for k, v in headers.items() if k.lower() == "x-amzn-errortype"), None)
    if raw is None and data is not None:
        found = data.get("__type") or data.get("code")
        raw = found if isinstance(found, str) else None
    if not raw:
        return None
    return raw.split(":", 1)[0].rsplit("#", 1)[-1] or None


_SKEW_WORDS = ("signature expired", "signature not yet current", "time too skewed")
"""What AWS says of a signature dated too far from its clock (RequestTimeTooSkewed's too)."""


def skew_hint(message: str) -> str:
    """``message`` with what to do when it refuses a signature for its time: SigV4 dates it by
    this machine's clock, which botocore does not correct."""
    if not any(words in message.lower() for words in _SKEW_WORDS):
        return message
    return (
        f"{message} (the signature is dated by this machine's clock; AWS refuses one more "
        "than 5 minutes off its own: set the clock right, with NTP)"
    )


def aws_error(
    status: int | None, headers: Mapping[str, str], kind: str | None, message: str
) -> AdapterError:
    """The classified error for an AWS exception type (or the status alone when unknown)."""
    message = skew_hint(message)
    found = _EXCEPTIONS.get((kind or "").lower())
    error_class, retryable = found if found else (None, None)
    request_id = next((v for k, v in headers.items() if k.lower() == "x-amzn-requestid"), None)
    return http_error(
        status,
        headers,
        message or f"AWS reported {kind or 'an error'} without a message",
        error_class=error_class,
        code=kind,
        request_id=request_id,
        retryable=retryable,
    )


def error_from_http(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    data = json_body(body)
    message = ""
    if data is not None:
        found = data.get("message", data.get("Message"))
        message = found if isinstance(found, str) else ""
    return aws_error(status, headers, exception_type(headers, data), message or body_excerpt(body))
