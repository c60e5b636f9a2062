"""AWS Bedrock Runtime: Converse (``/model/{id}/converse``, ``/converse-stream``) and Claude
through InvokeModel (``/model/{id}/invoke``, ``/invoke-with-response-stream``).

Auth as Bedrock checks it: a Bedrock API key as ``Authorization: Bearer ...``, or a SigV4
signature, recomputed with botocore from the request as received for the access keys in
:data:`CREDENTIALS` (a wrong signature, an unknown key, a stale ``X-Amz-Date`` and the session
token :data:`EXPIRED_TOKEN` are refused with the 403 and exception type AWS sends). Errors are
``{"message": ...}`` with ``x-amzn-ErrorType``; streams are AWS event-stream frames with both
CRCs, and an error inside one is an exception frame. InvokeModel's Claude body is Anthropic's
Messages body (validated by the Anthropic emulator) with ``anthropic_version``, and its stream
carries each Anthropic event base64-encoded in a ``chunk`` frame.
"""

from __future__ import annotations

import base64
import calendar
import json
import re
import time
from typing import Any
from urllib.parse import unquote

from metis.testing.emulator._wire import (
    ApiError,
    Env,
    Frame,
    HttpRequest,
    Ids,
    JsonReply,
    Provider,
    StreamReply,
    parse_json_object,
)
from metis.testing.emulator.anthropic import Anthropic
from metis.testing.emulator.bedrock_converse import converse_message, converse_prompt, stream_events
from metis.wire.framing.aws_eventstream import event_frame, exception_frame

CREDENTIALS = {
    "AKIDEMULATOR": "emulator/secret/key+EXAMPLE",
    "AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
}
"""Access key id -> secret access key: the identities the emulator's SigV4 check knows."""
EXPIRED_TOKEN = "emulator-expired-session-token"
ANTHROPIC_VERSION = "bedrock-2023-05-31"
MAX_CLOCK_SKEW = 300  # seconds: AWS refuses a signature dated further off than 5 minutes

_PATH = re.compile(
    r"^/model/([^/]+)/(converse|converse-stream|invoke|invoke-with-response-stream|count-tokens)$"
)
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?"
    r"Signature=(?P<sig>[0-9a-f]{64})$"
)
EVENTSTREAM = "application/vnd.amazon.eventstream"
FAULTS = {
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
}
STREAM_EXCEPTIONS = {
    "rate_limit": "throttlingException",
    "overloaded": "serviceUnavailableException",
    "server_error": "modelStreamErrorException",
}


class Bedrock(Provider):
    name = "bedrock"

    def route(self, method: str, path: str) -> str | None:
        match = _PATH.match(path)
        return match.group(2) if match and method == "POST" else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if _PATH.match(path) else []

    def error(self, status: int, kind: str, message: str, **headers: str) -> JsonReply:
        return JsonReply(
            status,
            {"message": message},
            {
                "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                **headers,
            },
        )

    def invalid(self, message: str) -> JsonReply:
        return self.error(400, "ValidationException", message)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "context_overflow":
            return self.invalid("Input is too long for requested model.")
        status, exception, message = FAULTS.get(kind, FAULTS["server_error"])
        return self.error(status, exception, message)

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        authorization = request.header("authorization") or ""
        if authorization.startswith("Bearer "):
            token = authorization[len("Bearer ") :].strip()
            if token and (keys is None or token in keys):
                return None
            return self.error(
                403,
                "UnrecognizedClientException",
                "Invalid API Key format: Must start with pre-defined prefix",
            )
        if not authorization:
            return self.error(
                403, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        return self._check_signature(authorization, request)

    def _check_signature(self, authorization: str, request: HttpRequest) -> JsonReply | None:
        from metis.stages.auth.aws import expected_signature

        parts = _AUTHORIZATION.match(authorization)
        if parts is None:
            return self.error(
                403,
                "IncompleteSignatureException",
                "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' "
                "parameters.",
            )
        secret = CREDENTIALS.get(parts["key"])
        token = request.header("x-amz-security-token")
        if secret is None:
            return self.error(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )
        if token == EXPIRED_TOKEN:
            return self.error(
                403,
                "ExpiredTokenException",
                "The security token included in the request is expired",
            )
        amz_date = request.header("x-amz-date") or ""
        stale = self._date_refusal(amz_date)
        if stale is not None:
            return stale
        from botocore.credentials import Credentials

        names = parts["signed"].split(";")
        signed = {name: request.header(name) or "" for name in names}
        url = f"http://{request.header('host')}{request.path}"
        wanted = expected_signature(
            request.method,
            url,
            signed,
            request.body,
            Credentials(parts["key"], secret, token),
            parts["region"],
            parts["service"],
            amz_date,
        )
        if wanted != parts["sig"] or parts["service"] != "bedrock":
            return self.error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you "
                "provided. Check your AWS Secret Access Key and signing method.",
            )
        return None

    def _date_refusal(self, amz_date: str) -> JsonReply | None:
        try:
            signed_at = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            return self.error(
                403, "IncompleteSignatureException", "X-Amz-Date is missing or malformed"
            )
        if abs(time.time() - signed_at) > MAX_CLOCK_SKEW:
            return self.error(
                403,
                "InvalidSignatureException",
                f"Signature expired: {amz_date} is now earlier or later than the allowed skew.",
            )
        return None

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        model = unquote(_PATH.match(request.path).group(1))  # type: ignore[union-attr]
        body = parse_json_object(request, self.invalid)
        if endpoint == "count-tokens":
            return self._count(model, body, env)
        streamed = endpoint.endswith("stream")
        if endpoint.startswith("invoke"):
            return self._invoke(model, body, request, env, streamed)
        try:
            prompt = converse_prompt(model, body, env)
        except ValueError as exc:
            raise ApiError(self.invalid(str(exc))) from None
        reply = env.responder.reply(prompt)
        self._check_context(reply.usage.input_tokens, env)
        message = converse_message(reply, Ids(request.digest))
        if not streamed:
            return JsonReply(200, message, {"content-type": "application/json"})
        frames = [_frame(kind, payload) for kind, payload in stream_events(message, reply)]
        return StreamReply(frames, {"content-type": EVENTSTREAM}, self._stream_error)

    def _count(self, model: str, body: dict[str, Any], env: Env) -> JsonReply:
        """CountTokens: ``{"input": {"converse": {...}}}`` or ``{"input": {"invokeModel":
        {"body": "<JSON>"}}}``, answered ``{"inputTokens": N}``."""
        given = body.get("input")
        if not isinstance(given, dict) or len(given) != 1:
            raise ApiError(self.invalid("input: expected exactly one of converse, invokeModel"))
        ((kind, content),) = given.items()
        if kind == "converse" and isinstance(content, dict):
            text = json.dumps({k: content.get(k) for k in ("messages", "system", "toolConfig")})
        elif kind == "invokeModel" and isinstance(content, dict):
            text = str(content.get("body", ""))
        else:
            raise ApiError(self.invalid(f"input.{kind}: not a CountTokens input"))
        return JsonReply(
            200, {"inputTokens": max(1, (len(text) + 3) // 4)}, {"content-type": "application/json"}
        )

    def _invoke(
        self, model: str, body: dict[str, Any], request: HttpRequest, env: Env, streamed: bool
    ) -> JsonReply | StreamReply:
        if body.get("anthropic_version") != ANTHROPIC_VERSION:
            raise ApiError(self.invalid(f"anthropic_version: must be {ANTHROPIC_VERSION!r}"))
        for key in ("model", "stream"):
            if key in body:
                raise ApiError(self.invalid(f"#: extraneous key [{key}] is not permitted"))
        anthropic = Anthropic()
        messages = {k: v for k, v in body.items() if k != "anthropic_version"}
        try:
            prompt = anthropic.prompt({**messages, "model": model}, request, env)
        except ApiError as refused:  # Anthropic's error, answered as Bedrock answers it
            raise ApiError(self.invalid(str(refused.reply.body["error"]["message"]))) from None
        reply = env.responder.reply(prompt)
        self._check_context(reply.usage.input_tokens, env)
        message = anthropic._message(model, reply, Ids(request.digest))
        if not streamed:
            return JsonReply(200, message, {"content-type": "application/json"})
        frames = [
            _frame("chunk", {"bytes": base64.b64encode(sse.payload).decode()})
            for sse in anthropic._events(message, reply)
            if b'"ping"' not in sse.payload
        ]
        return StreamReply(frames, {"content-type": EVENTSTREAM}, self._stream_error)

    def _check_context(self, tokens: int, env: Env) -> None:
        if tokens > env.context_tokens.get(self.name, 200_000):
            raise ApiError(self.invalid("Input is too long for requested model."))

    def _stream_error(self, kind: str) -> list[Frame]:
        exception = STREAM_EXCEPTIONS.get(kind, "internalServerException")
        message = FAULTS.get(kind, FAULTS["server_error"])[2]
        return [Frame(exception_frame(exception, message), b"", b"")]


def _frame(kind: str, payload: dict[str, Any]) -> Frame:
    """An event frame, split so that a truncated one (the malformed fault) breaks the stream."""
    data = event_frame(kind, payload)
    return Frame(data[:-24], data[-24:-4], data[-4:])
