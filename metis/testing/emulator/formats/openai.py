"""What OpenAI's APIs share, for Chat Completions, Responses, Azure and the OpenAI-compatible
services: Bearer keys, the error body (``message``, ``type``, ``param``, ``code``), the status
faults, the model list (``GET /v1/models``), and the strict JSON schema rules both APIs apply
(their shared table rows are ``tables/openai.yaml``).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from metis.testing.emulator.formats.base import Call, Format
from metis.testing.emulator.formats.openai_cache_rules import breakpoint_segments
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.wire import HttpRequest, JsonReply, object_at, request_ids

REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with "
    "blank username) if you're accessing the API from your browser and are prompted for a "
    "username. You can obtain an API key from https://platform.openai.com/account/api-keys."
)
SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"
OVERLOADED = "The server is overloaded or not ready yet."
QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
RATE_LIMITED = "rate_limit_exceeded"
STREAM_ERRORS = {
    "rate_limit": ("Rate limit reached. Please try again later.", "requests", RATE_LIMITED),
    "overloaded": (OVERLOADED, "server_error", None),
}
"""An error inside a 200 stream, by fault: its message, type and code (else a server error)."""


def strict_schema_problem(schema: Any, path: str = "()") -> str | None:
    """What OpenAI's strict mode refuses in a schema (None: nothing): every object closed with
    ``additionalProperties: false`` and every property required, at every level."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind):
        if schema.get("additionalProperties") is not False:
            return (
                f"In context={path}, 'additionalProperties' is required to be supplied and to be "
                f"false."
            )
        props = schema.get("properties") or {}
        missing = [p for p in props if p not in (schema.get("required") or [])]
        if missing:
            return (
                f"In context={path}, 'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'."
            )
        subs = [(sub, f"('properties', '{name}')") for name, sub in props.items()]
    else:
        subs = []
    for key in ("items", "anyOf", "allOf"):
        value = schema.get(key)
        subs += [(item, f"('{key}',)") for item in (value if isinstance(value, list) else [value])]
    defs = schema.get("$defs") or schema.get("definitions") or {}
    subs += [(sub, f"('$defs', '{name}')") for name, sub in defs.items()]
    return next((p for sub, at in subs if (p := strict_schema_problem(sub, at))), None)


def json_schema_format(spec: Any, where: str, schema_param: str) -> dict[str, Any]:
    """The schema of a ``json_schema`` output format (Chat's ``response_format.json_schema``,
    Responses' ``text.format``), refused when unnamed or not strict-valid."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise Refused(
            f"Missing required parameter: '{where}.name'.",
            f"{where}.name",
            "missing_required_parameter",
        )
    schema = object_at(spec, "schema")
    problem = strict_schema_problem(schema) if spec.get("strict") is True else None
    if problem:
        message = f"Invalid schema for response_format '{spec['name']}': {problem}"
        raise Refused(message, schema_param, "invalid_json_schema")
    return schema


class OpenAI(Format):
    """The OpenAI base. Subclasses set the routes, rules, and how they read and render."""

    catalog: ClassVar[tuple[str, ...]] = ("openai",)
    window: ClassVar[int | None] = 128_000
    too_long = (
        "This model's maximum context length is {limit} tokens. However, your messages resulted "
        "in {tokens} tokens. Please reduce the length of the messages."
    )
    too_long_named = ("messages", "context_length_exceeded")
    no_model = (404, "The model `{model}` does not exist or you do not have access to it.")
    no_model_named: ClassVar[tuple[str | None, str | None]] = (None, "model_not_found")

    def error(
        self,
        status: int,
        message: str,
        request: HttpRequest,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> JsonReply:
        body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
        return JsonReply(status, body, self.headers(request))

    def headers(self, request: HttpRequest) -> dict[str, str]:
        return {
            "x-request-id": "req_" + request_ids(request).token(32, "hex"),
            "openai-organization": "emulator-org",
            "openai-processing-ms": "1",
            "openai-version": "2020-10-01",
            "access-control-expose-headers": "X-Request-ID",
        }

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        key = request.bearer()
        if not key:
            return self.error(401, NO_KEY, request)
        return self.invalid_key(request, key) if keys is not None and key not in keys else None

    def invalid_key(self, request: HttpRequest, key: str = "sk-emulator") -> JsonReply:
        shown = key[:3] + "*" * 4 + key[-4:] if len(key) > 8 else key[:1] + "***"
        message = (
            f"Incorrect API key provided: {shown}. You can find your API key at "
            f"https://platform.openai.com/account/api-keys."
        )
        return self.error(401, message, request, code="invalid_api_key")

    def cached(self, call: Any, prompt: Any, reply: Any) -> None:
        """gpt-5.6 and later cache at breakpoints only (:mod:`.openai_cache_rules`); the
        others every prefix, in steps of 128 tokens."""
        options = call.body.get("prompt_cache_options")
        marks = breakpoint_segments(prompt.model, prompt.items or [], options)
        if marks is None:
            super().cached(call, prompt, reply)
            return
        segments = prompt.segments
        read, written = call.env.cache.explicit(
            "openai-breakpoints", segments, marks, lookback=len(segments)
        )
        reply.usage.cache_read, reply.usage.cache_write = read, written

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        return self.error(
            refused.status, refused.message, request, param=refused.param, code=refused.code
        )

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            model = re.search(rb'"model"\s*:\s*"([^"]{1,100})"', request.body)
            name = model.group(1).decode(errors="replace") if model else "gpt-4o"
            wait = f"{retry_after:g}s"
            message = (
                f"Rate limit reached for {name} in organization org-emulator on requests per min "
                f"(RPM): Limit 500, Used 500, Requested 1. Please try again in {wait}. Visit "
                "https://platform.openai.com/account/rate-limits to learn more."
            )
            reply = self.error(429, message, request, "requests", code="rate_limit_exceeded")
            reply.headers.update(
                {
                    "retry-after": f"{retry_after:g}",
                    "x-ratelimit-limit-requests": "500",
                    "x-ratelimit-remaining-requests": "0",
                    "x-ratelimit-reset-requests": wait,
                }
            )
            return reply
        if kind == "overloaded":
            return self.error(503, OVERLOADED, request, "server_error")
        if kind == "server_error":
            return self.error(500, SERVER_ERROR, request, "server_error")
        if kind == "auth":
            return self.invalid_key(request)
        if kind == "out_of_credit":
            return self.error(429, QUOTA, request, "insufficient_quota", code="insufficient_quota")
        return self.refusal(self.overflow(131072, 128000), request)

    def listed(self, call: Call) -> tuple[str, ...]:
        """The catalog providers whose models ``GET .../models`` lists."""
        return self.catalog

    def serve(self, call: Call) -> JsonReply | None:
        """``GET .../models`` and ``GET .../models/{id}``."""
        if not call.endpoint.startswith("model"):
            return None
        data = [_model(m.id, m.created) for m in self.models(call, self.listed(call))]
        body = data[0] if call.endpoint == "model" else {"object": "list", "data": data}
        return JsonReply(200, body, self.headers(call.request))


def _model(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "system"}
