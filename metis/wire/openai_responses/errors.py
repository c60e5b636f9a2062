"""The errors of OpenAI Responses replies: HTTP statuses, the ``error`` objects of a stream
(``response.failed``, ``error`` events), and a reply still pending (background mode), each a
classified AdapterError."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError, ErrorClass, InvalidRequestError
from metis.wire.http_errors import http_error, openai_error_fields, own_status

_CODE_CLASSES = {
    "rate_limit_exceeded": ErrorClass.RATE_LIMIT,
    "insufficient_quota": ErrorClass.RATE_LIMIT,  # not retryable: see responses_error
    "context_length_exceeded": ErrorClass.CONTEXT_OVERFLOW,
    "invalid_api_key": ErrorClass.AUTH,
    "server_error": ErrorClass.SERVER_ERROR,
    "server_is_overloaded": ErrorClass.OVERLOADED,
    "vector_store_timeout": ErrorClass.SERVER_ERROR,
}
_CODE_CLASSES.update(  # a response that failed for what it was asked: it would fail again
    dict.fromkeys(
        (
            "data_residency_mismatch",
            "bio_policy",
            "misalignment_policy_violation",
            "image_too_large",
            "image_too_small",
            "image_parse_error",
            "image_content_policy_violation",
            "image_file_too_large",
            "empty_image_file",
            "failed_to_download_image",
            "image_file_not_found",
        ),
        ErrorClass.INVALID_REQUEST,
    )
)
PENDING = frozenset({"queued", "in_progress"})
"""The statuses of a response not yet finished: what background mode answers at once."""
_TYPE_CLASSES = {
    "invalid_request_error": ErrorClass.INVALID_REQUEST,
    "server_error": ErrorClass.SERVER_ERROR,
    "rate_limit_error": ErrorClass.RATE_LIMIT,
}


def responses_error(
    status: int | None,
    headers: Mapping[str, str],
    message: str,
    code: str | None,
    kind: str | None,
    request_id: str | None = None,
) -> AdapterError:
    """An HTTP status decides unless the code says more; in a stream, the type decides."""
    cls = _CODE_CLASSES.get(code or "")
    if cls is None and status is None:
        cls = _TYPE_CLASSES.get(kind or "")
        if cls is None and (code or "").startswith(("invalid_", "unsupported_")):
            cls = ErrorClass.INVALID_REQUEST
    return http_error(
        status,
        headers,
        message
        or ("" if status else f"openai_responses reported {code or kind or 'an error'} alone"),
        error_class=cls,
        code=code or kind,
        request_id=request_id,
        retryable=False if code == "insufficient_quota" else None,  # out of credit
        retried_by_status=True,
    )


def body_error(data: dict[str, Any], fallback: str = "") -> AdapterError:
    """An error object in a 200 body or a stream's event (``{"error": {...}}``, or the event's
    own fields), classified by the status it says it is where it says one (Azure's
    ``status``, OpenRouter's numeric ``code``), else by its code and type."""
    info = openai_error_fields(data) or (fallback, None, None)
    error = data.get("error")
    return responses_error(own_status(error if isinstance(error, dict) else data), {}, *info)


def pending_error(response: Mapping[str, Any]) -> InvalidRequestError | None:
    """The error a whole response still pending is (``background: true`` answers at once with
    the response ``queued``, its result fetched later by id): no reply yet, so not one with an
    ending; not retried, as a retry would start another response, billed again. None for a
    response of any other status."""
    status = response.get("status")
    if status.__class__ is not str or status not in PENDING:  # a list or object: not pending
        return None
    given = response.get("id")
    named = f"response {given}" if isinstance(given, str) else "a response"
    return InvalidRequestError(
        f"openai_responses answered with {named[:200]} still {status} (background mode): "
        "metis reads a finished reply; send the request without background, or fetch the "
        "response by its id when it is done",
        provider_code=str(status),
        retryable=False,
    )


def cut_while_pending(response_id: str | None) -> str:
    """What a stream that ended before its response did says: the response's id, which a
    background response goes on under at the provider."""
    if response_id is None:
        return "openai_responses stream ended before the response did"
    return (
        f"openai_responses stream ended before the response did (response {response_id[:200]}; "
        "a background response goes on at the provider and can be fetched by this id)"
    )
