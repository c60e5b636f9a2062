"""The cloud platforms' routes: Gemini and Claude on Google Vertex AI, OpenAI on Azure.

Each serves a provider's own wire format (the Gemini, Anthropic, OpenAI Chat and Responses
emulators do the work) at the platform's paths, with the platform's authentication:

- Vertex AI: ``/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent``
  (and ``:streamGenerateContent``), ``/v1/.../publishers/anthropic/models/{m}:rawPredict`` (and
  ``:streamRawPredict``), an OAuth bearer token (an API key is refused), errors as google.rpc
  statuses. Claude's body names no ``model`` (the URL does) and carries ``anthropic_version:
  vertex-2023-10-16``.
- Azure OpenAI's v1 API: ``/openai/v1/chat/completions`` and ``/openai/v1/responses``, with an
  ``api-key`` header or an Entra ID bearer token, refused as Azure refuses them. They are
  served under ``/azure`` (``Emulator.base_url("azure")`` includes it), the resource's host.

With ``Emulator(api_keys=...)``, only those keys and tokens are accepted.
"""

from __future__ import annotations

import dataclasses
import json
import re

from metis.testing.emulator._wire import Env, HttpRequest, JsonReply, StreamReply, parse_json_object
from metis.testing.emulator.anthropic import Anthropic
from metis.testing.emulator.gemini import Gemini, google_error
from metis.testing.emulator.openai_chat import OpenAIChat
from metis.testing.emulator.openai_responses import OpenAIResponses

VERTEX_GEMINI = re.compile(
    r"^/(v1|v1beta1)/projects/([^/]+)/locations/([^/]+)/publishers/google/models/([^/:]+)"
    r":(generateContent|streamGenerateContent|countTokens)$"
)
VERTEX_CLAUDE = re.compile(
    r"^/v1/projects/([^/]+)/locations/([^/]+)/publishers/anthropic/models/([^/:]+)"
    r":(rawPredict|streamRawPredict)$"
)
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
# Azure's paths are served under /azure, which stands for the resource's own host: Groq serves
# the same /openai/v1/chat/completions path on its host.
AZURE_MOUNT = "/azure"
AZURE_CHAT = AZURE_MOUNT + "/openai/v1/chat/completions"
AZURE_RESPONSES = AZURE_MOUNT + "/openai/v1/responses"


def vertex_authenticate(request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
    """Vertex takes an OAuth access token; an API key or a wrong token is a 401."""
    scheme, _, token = (request.header("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return google_error(
            401,
            "UNAUTHENTICATED",
            "Request is missing required authentication credential. Expected OAuth 2 access "
            "token, login cookie or other valid authentication credential. See "
            "https://developers.google.com/identity/sign-in/web/devconsole-project.",
        )
    if keys is not None and token.strip() not in keys:
        return google_error(
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, "
            "login cookie or other valid authentication credential. See "
            "https://developers.google.com/identity/sign-in/web/devconsole-project.",
        )
    return None


def _vertex_quota() -> JsonReply:
    return google_error(
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per"
        "_project_per_base_model with base model: emulated. Please submit a quota increase "
        "request. https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai.",
    )


class _OnVertex:
    """What Vertex AI does the same for every publisher: OAuth tokens, and its quota 429."""

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        return vertex_authenticate(request, keys)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            return _vertex_quota()
        reply: JsonReply = super().fault(kind, request, retry_after)  # type: ignore[misc]
        return reply


class VertexGemini(_OnVertex, Gemini):
    name = "vertex"

    def route(self, method: str, path: str) -> str | None:
        match = VERTEX_GEMINI.match(path)
        return match.group(5) if match and method == "POST" else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if VERTEX_GEMINI.match(path) else []

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        model = VERTEX_GEMINI.match(request.path).group(4)  # type: ignore[union-attr]
        as_gemini = dataclasses.replace(request, path=f"/v1beta/models/{model}:{endpoint}")
        return super().handle(endpoint, as_gemini, env)


class VertexAnthropic(_OnVertex, Anthropic):
    name = "vertex_anthropic"

    def route(self, method: str, path: str) -> str | None:
        match = VERTEX_CLAUDE.match(path)
        return match.group(4) if match and method == "POST" else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if VERTEX_CLAUDE.match(path) else []

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        body = parse_json_object(request, lambda m: self.invalid(m, request))
        if "model" in body:
            return self.invalid("model: Extra inputs are not permitted", request)
        version = body.pop("anthropic_version", None)
        if version != VERTEX_ANTHROPIC_VERSION:
            return self.invalid(
                f"anthropic_version: Input should be '{VERTEX_ANTHROPIC_VERSION}'", request
            )
        if (endpoint == "streamRawPredict") != (body.get("stream") is True):
            return self.invalid(
                "stream: streamRawPredict takes stream: true and rawPredict does not", request
            )
        body["model"] = VERTEX_CLAUDE.match(request.path).group(3)  # type: ignore[union-attr]
        as_messages = dataclasses.replace(
            request, path="/v1/messages", body=json.dumps(body).encode()
        )
        return super().handle("messages", as_messages, env)


def azure_authenticate(request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
    """An ``api-key`` header, or an Entra ID bearer token; Azure's 401 bodies otherwise."""
    key = request.header("api-key")
    scheme, _, token = (request.header("authorization") or "").partition(" ")
    if key:
        if keys is None or key in keys:
            return None
        return _azure_401(
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
            "provide a valid key for an active subscription and use a correct regional API "
            "endpoint for your resource."
        )
    if scheme.lower() == "bearer" and token.strip():
        if keys is None or token.strip() in keys:
            return None
        return _azure_401(
            "Unauthorized. Access token is missing, invalid, audience is incorrect "
            "(https://cognitiveservices.azure.com), or have expired."
        )
    return _azure_401(
        "Access denied due to missing subscription key. Make sure to include subscription key "
        "when making requests to an API."
    )


def _azure_401(message: str) -> JsonReply:
    return JsonReply(401, {"error": {"code": "401", "message": message}})


def azure_fault(kind: str, retry_after: float) -> JsonReply | None:
    """Azure's own 429 (a deployment's token or request quota) and 401; None for the rest,
    which Azure passes through from the model service in OpenAI's shape."""
    if kind == "rate_limit":
        seconds = max(1, round(retry_after))
        message = (
            "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version v1 "
            "have exceeded token rate limit of your current AIServices S0 pricing tier. Please "
            f"retry after {seconds} seconds."
        )
        return JsonReply(
            429,
            {"error": {"code": "429", "message": message}},
            {"retry-after": str(seconds), "x-ratelimit-remaining-tokens": "0"},
        )
    if kind == "auth":
        return _azure_401(
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
            "provide a valid key for an active subscription and use a correct regional API "
            "endpoint for your resource."
        )
    return None


class AzureChat(OpenAIChat):
    name = "azure"

    def route(self, method: str, path: str) -> str | None:
        return "chat" if method == "POST" and path == AZURE_CHAT else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if path == AZURE_CHAT else []

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        return azure_authenticate(request, keys)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        return azure_fault(kind, retry_after) or super().fault(kind, request, retry_after)


class AzureResponses(OpenAIResponses):
    name = "azure_responses"

    def route(self, method: str, path: str) -> str | None:
        return "responses" if method == "POST" and path == AZURE_RESPONSES else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if path == AZURE_RESPONSES else []

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        return azure_authenticate(request, keys)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        return azure_fault(kind, retry_after) or super().fault(kind, request, retry_after)


CLOUD_PROVIDERS = (VertexGemini, VertexAnthropic, AzureChat, AzureResponses)
CLOUD_ALIASES = {
    "vertex": "vertex",
    "vertex_anthropic": "vertex_anthropic",
    "azure": "azure",
    "azure_responses": "azure_responses",
}
CLOUD_MOUNTS = {"azure": AZURE_MOUNT, "azure_responses": AZURE_MOUNT}
