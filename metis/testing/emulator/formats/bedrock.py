"""AWS Bedrock Runtime: Converse (``/model/{id}/converse``, ``/converse-stream``), Claude through
InvokeModel (``/model/{id}/invoke``, ``/invoke-with-response-stream``) and CountTokens
(``/model/{id}/count-tokens``).

Auth as Bedrock checks it: a Bedrock API key as ``Authorization: Bearer ...``, or a SigV4
signature, recomputed with botocore from the request as received for the access keys in
:data:`CREDENTIALS` (a wrong signature, an unknown key, a stale ``X-Amz-Date`` and the session
token :data:`EXPIRED_TOKEN` are refused with the 403 and exception type AWS sends). Errors are
``{"message": ...}`` with ``x-amzn-ErrorType``; streams are AWS event-stream frames with both
CRCs, and an error inside one is an exception frame. InvokeModel's Claude body is Anthropic's
Messages body (checked by Anthropic's rules) with ``anthropic_version``, and its stream
carries each Anthropic event base64-encoded in a ``chunk`` frame.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import unquote

from metis.testing.emulator.formats.anthropic import Anthropic
from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.formats.bedrock_invoke import (
    STREAM_HEADERS,
    invoke_chunks,
    invoke_headers,
    invoke_message,
    request_id,
)
from metis.testing.emulator.formats.converse import (
    RULES,
    converse_message,
    converse_prompt,
    reasoning_shown,
    stream_events,
)
from metis.testing.emulator.formats.document_citations import converse_document_citations
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.rules import Refused, check, table
from metis.testing.emulator.wire import Frame, HttpRequest, Ids, JsonReply

CREDENTIALS = {
    "AKIDEMULATOR": "emulator/secret/key+EXAMPLE",
    "AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
}
"""Access key id -> secret access key: the identities the emulator's SigV4 check knows."""
EXPIRED_TOKEN = "emulator-expired-session-token"
MAX_CLOCK_SKEW = 300  # seconds: AWS refuses a signature dated further off than 5 minutes
AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?"
    r"Signature=(?P<sig>[0-9a-f]{64})$"
)
EVENTSTREAM = "application/vnd.amazon.eventstream"
_CORAL = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
FAULTS: dict[str, tuple[Any, ...]] = {
    "rate_limit": (
        429,
        "ThrottlingException",
        "Too many requests, please wait before trying again.",
    ),
    "overloaded": (
        503,
        "ServiceUnavailableException",
        "Bedrock is unable to process your request.",
    ),
    "server_error": (500, "InternalServerException", "The server encountered an internal error."),
    "auth": (
        403,
        "AccessDeniedException",
        "You don't have access to the model with the specified model ID.",
    ),
    "out_of_credit": (
        403,
        "AccessDeniedException",
        "Model access is denied due to INVALID_PAYMENT_INSTRUMENT:A valid payment instrument "
        "must be provided.",
    ),
}
STREAM_EXCEPTIONS = {
    "rate_limit": "throttlingException",
    "overloaded": "serviceUnavailableException",
    "server_error": "modelStreamErrorException",
}
INVOKE_RULES = table("bedrock_invoke")
_INCOMPLETE = (
    "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters."
)
SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method."
)


def error(status: int, kind: str, message: str, request: HttpRequest) -> JsonReply:
    """An error reply naming its request (``x-amzn-RequestId``)."""
    headers = {"x-amzn-ErrorType": kind + _CORAL, **request_id(request)}
    return JsonReply(status, {"message": message}, headers)


class Bedrock(Format):
    name = "bedrock"
    routes: ClassVar[Sequence[Route]] = (
        (
            "POST",
            r"/model/(?P<model>[^/]+)/(?P<action>converse|converse-stream|invoke|invoke-with-response-stream|count-tokens)",
            "model",
        ),
    )
    rules = RULES
    catalog: ClassVar[tuple[str, ...]] = ("amazon-bedrock",)
    too_long = "Input is too long for requested model."
    no_model = (400, "The provided model identifier is invalid.")

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        authorization = request.header("authorization") or ""
        if authorization.startswith("Bearer "):
            token = request.bearer()
            if token and (keys is None or token in keys):
                return None
            return _denied(
                "UnrecognizedClient",
                "Invalid API Key format: Must start with pre-defined prefix",
                request,
            )
        if not authorization:
            return _denied("MissingAuthenticationToken", "Missing Authentication Token", request)
        return _check_signature(authorization, request)

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        kind = "ResourceNotFoundException" if refused.status == 404 else "ValidationException"
        return error(refused.status, kind, refused.message, request)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "context_overflow":
            return self.refusal(self.overflow(0, 0), request)
        status, error_type, message = FAULTS.get(kind, FAULTS["server_error"])
        return error(status, error_type, message, request)

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        from metis.wire.framing.aws_eventstream import exception_frame

        exception = STREAM_EXCEPTIONS.get(kind, "internalServerException")
        return [
            Frame(exception_frame(exception, FAULTS.get(kind, FAULTS["server_error"])[2]), b"", b"")
        ]

    def headers(self, request: HttpRequest) -> dict[str, str]:
        return request_id(request)

    def stream_headers(self, call: Call) -> dict[str, str]:
        invoked = STREAM_HEADERS if call.options["action"].startswith("invoke") else {}
        return {"content-type": EVENTSTREAM, **invoked}

    def parse(self, call: Call) -> None:
        call.model = unquote(call.match["model"])
        action = call.options["action"] = call.match["action"]
        call.stream = action.endswith("stream")
        if action.startswith("invoke"):
            check(INVOKE_RULES, call.body)
            call.body = {
                **{k: v for k, v in call.body.items() if k != "anthropic_version"},
                "model": call.model,
            }
            Anthropic().parse(call)
            call.stream = action.endswith("stream")
        elif action != "count-tokens":
            check(self.rules, call.body, call)

    def serve(self, call: Call) -> JsonReply | None:
        """CountTokens: ``{"input": {"converse": {...}}}`` or ``{"input": {"invokeModel":
        {"body": "<JSON>"}}}``, answered ``{"inputTokens": N}``."""
        if call.options["action"] != "count-tokens":
            return None
        given = call.body.get("input")
        if not isinstance(given, dict) or len(given) != 1:
            raise Refused("input: expected exactly one of converse, invokeModel")
        ((kind, content),) = given.items()
        if kind == "converse" and isinstance(content, dict):
            text = json.dumps({k: content.get(k) for k in ("messages", "system", "toolConfig")})
        elif kind == "invokeModel" and isinstance(content, dict):
            text = str(content.get("body", ""))
        else:
            raise Refused(f"input.{kind}: not a CountTokens input")
        return JsonReply(200, {"inputTokens": max(1, (len(text) + 3) // 4)})

    def read(self, call: Call) -> Prompt:
        if call.options["action"].startswith("invoke"):
            return Anthropic().read(call)
        return converse_prompt(call.model, call.body)

    def cached(self, call: Call, prompt: Prompt, reply: Reply) -> None:
        """Bedrock caches only where a request marks it (``cachePoint``, or Anthropic's
        ``cache_control`` through InvokeModel), as Anthropic does."""
        if prompt.breakpoints:
            read, written = call.env.cache.explicit(
                "bedrock", prompt.segments, prompt.breakpoints, prompt.segment_blocks
            )
            reply.usage.cache_read, reply.usage.cache_write = read, written

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> Any:
        if call.options["action"].startswith("invoke"):
            message = invoke_message(Anthropic().render(call, prompt, reply, ids), call.model)
            if call.stream:
                return message
            headers = {**self.headers(call.request), **invoke_headers(message)}
            return JsonReply(200, message, headers)
        documents = converse_document_citations(call.body) if reply.cite else []
        shown = reasoning_shown(call.model, call.body)
        message = converse_message(reply, ids, call.issued, shown, documents)
        asked = call.body.get("additionalModelResponseFieldPaths") or ()
        if reply.stop_sequence is not None and "/stop_sequence" in asked:
            message["additionalModelResponseFields"] = {"stop_sequence": reply.stop_sequence}
        return message

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        if call.options["action"].startswith("invoke"):
            chunks = invoke_chunks(rendered, call.options["response"].content)
            return [_frame("chunk", chunk) for chunk in chunks]
        return [_frame(kind, payload) for kind, payload in stream_events(rendered)]


def _frame(kind: str, payload: dict[str, Any]) -> Frame:
    """An event frame, split so that a truncated one (the malformed fault) breaks the stream."""
    from metis.wire.framing.aws_eventstream import event_frame

    data = event_frame(kind, payload)
    return Frame(data[:-24], data[-24:-4], data[-4:])


def _check_signature(authorization: str, request: HttpRequest) -> JsonReply | None:
    parts = AUTHORIZATION.match(authorization)
    if parts is None:
        return _denied("IncompleteSignature", _INCOMPLETE, request)
    secret = CREDENTIALS.get(parts["key"])
    token = request.header("x-amz-security-token")
    if secret is None:
        return _denied(
            "UnrecognizedClient", "The security token included in the request is invalid.", request
        )
    if token == EXPIRED_TOKEN:
        return _denied(
            "ExpiredToken", "The security token included in the request is expired", request
        )
    amz_date = request.header("x-amz-date") or ""
    try:
        signed_at = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        return _denied("IncompleteSignature", "X-Amz-Date is missing or malformed", request)
    if abs(time.time() - signed_at) > MAX_CLOCK_SKEW:
        skewed = f"Signature expired: {amz_date} is now earlier or later than the allowed skew."
        return _denied("InvalidSignature", skewed, request)
    from botocore.credentials import Credentials

    from metis.stages.auth.aws import expected_signature

    signed = {name: request.header(name) or "" for name in parts["signed"].split(";")}
    url = f"http://{request.header('host')}{request.path}"
    credentials = Credentials(parts["key"], secret, token)
    region, service = parts["region"], parts["service"]
    wanted = expected_signature(
        request.method, url, signed, request.body, credentials, region, service, amz_date
    )
    if wanted != parts["sig"] or service != "bedrock":
        return _denied("InvalidSignature", SIGNATURE, request)
    return None


def _denied(kind: str, message: str, request: HttpRequest) -> JsonReply:
    return error(403, kind + "Exception", message, request)
