"""Chat Completions errors: an HTTP error's body, and an error object in a 200 body or in a
stream chunk (OpenAI's ``{"error": {message, type, code}}``, and the shapes compatible servers
send), classified by the code, the type and the status (docs/contract.md §4).

An error object inside a 200 reply says its own status where the server gives one (Azure's
``error.status``, OpenRouter's numeric ``error.code`` in a stream); it is classified by that
status, so a refused prompt (Azure's content filter: 400) is an invalid request, not a server
error retried in vain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError, ErrorClass
from metis.wire.http_errors import http_error, openai_error_fields, own_status

_CODE_CLASSES = {
    "rate_limit_exceeded": ErrorClass.RATE_LIMIT,
    "insufficient_quota": ErrorClass.RATE_LIMIT,  # not retryable: see chat_error
    "context_length_exceeded": ErrorClass.CONTEXT_OVERFLOW,
    "too_many_prompt_tokens": ErrorClass.CONTEXT_OVERFLOW,  # Perplexity's type
    "invalid_api_key": ErrorClass.AUTH,
    "model_not_found": ErrorClass.INVALID_REQUEST,
}


def dump(obj: Any) -> str:
    return json.dumps(obj, default=repr)[:200]


def chat_error(
    status: int | None,
    headers: Mapping[str, str],
    message: str,
    code: str | None,
    kind: str | None,
    request_id: str | None = None,
) -> AdapterError:
    cls = _CODE_CLASSES.get(code or "") or _CODE_CLASSES.get(kind or "")
    if cls is None and kind in ("server_error", "invalid_request_error"):
        cls = ErrorClass.SERVER_ERROR if kind == "server_error" else ErrorClass.INVALID_REQUEST
        if status == 503:  # OpenAI's overloaded 503 says type server_error; let the text decide
            cls = None
    return http_error(
        status,
        headers,
        message,
        error_class=cls,
        code=code or kind,
        request_id=request_id,
        retryable=False if "insufficient_quota" in (code, kind) else None,  # out of credit
        retried_by_status=True,
    )


def body_error(obj: dict[str, Any]) -> AdapterError:
    """An error object in a stream chunk or in a 200 JSON body."""
    message, code, kind = openai_error_fields(obj) or (dump(obj), None, None)
    return chat_error(own_status(obj.get("error")), {}, message, code, kind)
