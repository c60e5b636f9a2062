"""Anthropic's errors: an HTTP error's body, and an ``error`` event in a 200 stream or an
error-typed 200 body (``{"type": "error", "error": {type, message}}``, or a proxy's untyped
``{"error": ...}``), classified by the error's type (docs/contract.md §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError, ErrorClass
from metis.wire.http_errors import body_excerpt, http_error, json_body

_ERROR_CLASSES = {
    "overloaded_error": ErrorClass.OVERLOADED,
    "rate_limit_error": ErrorClass.RATE_LIMIT,
    "authentication_error": ErrorClass.AUTH,
    "permission_error": ErrorClass.AUTH,
    "billing_error": ErrorClass.RATE_LIMIT,  # the account cannot pay: never retried (out_of_credit)
    "request_too_large": ErrorClass.CONTEXT_OVERFLOW,
    "invalid_request_error": ErrorClass.INVALID_REQUEST,
    "not_found_error": ErrorClass.INVALID_REQUEST,
    "api_error": ErrorClass.SERVER_ERROR,
    "timeout_error": ErrorClass.SERVER_ERROR,
    "gateway_timeout_error": ErrorClass.SERVER_ERROR,
}


def untyped_error(obj: dict[str, Any]) -> bool:
    """``obj`` is an error without Anthropic's ``"type": "error"`` (a proxy's ``{"error":
    "boom"}``): read as the error event it stands for."""
    return obj.get("type") is None and obj.get("error") is not None


def _error_fields(data: Any) -> tuple[str | None, str]:
    """``(error.type, error.message)`` from an Anthropic error object, or ``(None, "")``; an
    error that is a plain string is its message."""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, str):
        return None, error
    if not isinstance(error, dict):
        return None, ""
    kind, message = error.get("type"), error.get("message")
    return (kind if isinstance(kind, str) else None), (message if isinstance(message, str) else "")


def stream_error(obj: dict[str, Any], provider: str) -> AdapterError:
    """An ``error`` event in a 200 stream, or an error-typed 200 body: no HTTP status."""
    kind, message = _error_fields(obj)
    request_id = obj.get("request_id")
    return http_error(
        None,
        {},
        message or f"anthropic reported {kind or 'an error'} without a message",
        error_class=_ERROR_CLASSES.get(kind or ""),
        code=kind,
        request_id=request_id if isinstance(request_id, str) else None,
        provider=provider,
    )


def error_from_http(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    data = json_body(body)
    kind, message = _error_fields(data)
    if not message:
        message = body_excerpt(body)
    request_id = data.get("request_id") if data else None
    if not isinstance(request_id, str):
        request_id = next((v for k, v in headers.items() if k.lower() == "request-id"), None)
    return http_error(
        status,
        headers,
        message,
        error_class=_ERROR_CLASSES.get(kind) if kind else None,
        code=_detail_code(data) or kind,
        request_id=request_id,
        retried_by_status=True,
    )


def _detail_code(data: Any) -> str | None:
    """``error.details.error_code``, where Anthropic says more than the error's type (a thread
    it will not hold: ``thread_unsupported_request``)."""
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    code = details.get("error_code") if isinstance(details, dict) else None
    return code if isinstance(code, str) and code else None
