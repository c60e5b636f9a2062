"""The cloud platforms: Gemini and Claude on Google Vertex AI, OpenAI on Azure. Each serves a
provider's own format at the platform's paths, with the platform's authentication:

- Vertex AI: ``/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent``
  (and ``:streamGenerateContent``, ``:countTokens``), ``/v1/.../publishers/anthropic/models/{m}
  :rawPredict`` (and ``:streamRawPredict``; ``.../models/count-tokens:rawPredict`` counts, the
  model in its body), an OAuth bearer token (an API key is refused),
  errors as google.rpc statuses. Claude's body names no ``model`` (the URL does) and carries
  ``anthropic_version: vertex-2023-10-16``.
- Azure OpenAI's v1 API: ``/openai/v1/chat/completions``, ``/openai/v1/responses`` and
  ``/openai/v1/models``, with an ``api-key`` header or an Entra ID bearer token, refused as
  Azure refuses them; and the classic deployments path of Chat Completions, with Azure's
  content filter verdicts (:mod:`.azure_shapes`). They are served under ``/azure``
  (``Emulator.base_url("azure")`` includes it), which stands for the resource's own host:
  Groq serves the same ``/openai/v1/chat/completions`` path on its host.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from metis.testing.emulator.formats.anthropic import Anthropic
from metis.testing.emulator.formats.azure_shapes import (
    DEPLOYMENT,
    STREAMED_FILTERS,
    apim_headers,
    classic_path,
    filtered,
    prompt_filter_chunk,
)
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.chat import Chat
from metis.testing.emulator.formats.gemini import Gemini, google_error
from metis.testing.emulator.formats.responses import Responses
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.rules import Refused, check, table
from metis.testing.emulator.wire import Frame, HttpRequest, Ids, JsonReply

VERTEX = (
    r"/(?P<version>v1|v1beta1)/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/publishers"
)
AZURE_MOUNT = "/azure"
OAUTH = (
    "Expected OAuth 2 access token, login cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)
INVALID_KEY = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
    "valid key for an "
    "active subscription and use a correct regional API endpoint for your resource."
)
_BAD_TOKEN = (
    "Unauthorized. Access token is missing, invalid, audience is incorrect "
    "(https://cognitiveservices.azure.com), or have expired."
)
_NO_KEY = (
    "Access denied due to missing subscription key. Make sure to include subscription key "
    "when making requests to an API."
)
_VERTEX_QUOTA = (
    "Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute"
    "_per_project_per_base_model with base model: emulated. Please submit a quota "
    "increase request. https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai."
)
VERTEX_CLAUDE_RULES = table("vertex_anthropic")
VERTEX_CLAUDE_COUNT_RULES = table("vertex_anthropic_count")
_CREATED = "%Y-%m-%dT%H:%M:%S.%fZ"


class OnVertex:
    """What Vertex AI does the same for every publisher: OAuth tokens, and its quota 429."""

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        token = request.bearer()
        if token and (keys is None or token in keys):
            return None
        message = (
            f"Request had invalid authentication credentials. {OAUTH}"
            if token
            else f"Request is missing required authentication credential. {OAUTH}"
        )
        return google_error(401, "UNAUTHENTICATED", message)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            return google_error(429, "RESOURCE_EXHAUSTED", _VERTEX_QUOTA)
        reply: JsonReply = super().fault(kind, request, retry_after)  # type: ignore[misc]
        return reply

    def serve(self, call: Call) -> JsonReply | None:
        """A model it does not serve is Vertex's own 404 naming the publisher model, before
        anything else (a token count too)."""
        model = call.match.groupdict().get("model") or str(call.body.get("model"))
        if not self.serves(call.env, model):  # type: ignore[attr-defined]
            resource = call.request.path.split("/", 2)[2].rpartition("/models/")[0]
            resource = f"{resource}/models/{model}"
            raise Refused(
                f"Publisher Model `{resource}` was not found or your project does not have access "
                "to it. Please ensure you are using a valid model version. For more information, "
                "see: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions",
                status=404,
            )
        served: JsonReply | None = super().serve(call)  # type: ignore[misc]
        return served


class VertexGemini(OnVertex, Gemini):
    name = "vertex"
    routes: ClassVar[Sequence[Route]] = (
        (
            "POST",
            VERTEX
            + r"/google/models/(?P<model>[^/:]+)"
            + r":(?P<method>generateContent|streamGenerateContent|countTokens)",
            "generate",
        ),
    )
    catalog: ClassVar[tuple[str, ...]] = ("google-vertex",)

    def shaped(self, call: Call, body: dict[str, Any]) -> dict[str, Any]:
        """Each reply (and each streamed chunk) has its ``createTime`` (one for a stream's
        chunks) and its usage's ``trafficType``, and its candidates no ``index``, as
        recorded (real-traffic/vertex)."""
        created = call.options.setdefault("created", datetime.now(UTC).strftime(_CREATED))
        candidates = [{k: v for k, v in c.items() if k != "index"} for c in body["candidates"]]
        usage = {**body["usageMetadata"], "trafficType": "ON_DEMAND"}
        shaped = {"candidates": candidates, "usageMetadata": usage}
        shaped.update(modelVersion=body["modelVersion"], createTime=created)
        return {**shaped, **{k: v for k, v in body.items() if k not in shaped}}


class VertexAnthropic(OnVertex, Anthropic):
    name = "vertex_anthropic"
    routes: ClassVar[Sequence[Route]] = (
        (
            "POST",
            r"/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/count-tokens:rawPredict",
            "count_tokens",
        ),
        (
            "POST",
            r"/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/(?P<model>[^/:]+):(?P<method>rawPredict|streamRawPredict)",
            "messages",
        ),
    )
    catalog: ClassVar[tuple[str, ...]] = ("google-vertex-anthropic", "anthropic")

    def parse(self, call: Call) -> None:
        if call.endpoint == "count_tokens":  # the model in the body, as Anthropic's own
            check(VERTEX_CLAUDE_COUNT_RULES, call.body)
            call.body.pop("anthropic_version", None)
            super().parse(call)
            return
        check(VERTEX_CLAUDE_RULES, call.body)
        streamed = call.match["method"] == "streamRawPredict"
        if streamed != (call.body.get("stream") is True):
            raise Refused("stream: streamRawPredict takes stream: true and rawPredict does not")
        body = {k: v for k, v in call.body.items() if k != "anthropic_version"}
        call.body = {**body, "model": call.match["model"]}
        super().parse(call)


def azure_authenticate(request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
    """An ``api-key`` header, or an Entra ID bearer token; Azure's 401 bodies otherwise."""
    key, token = request.header("api-key"), request.bearer()
    given = key or token
    if given and (keys is None or given in keys):
        return None
    return _azure_401(INVALID_KEY if key else _BAD_TOKEN if token else _NO_KEY)


def _azure_401(message: str) -> JsonReply:
    return JsonReply(401, {"error": {"code": "401", "message": message}})


class OnAzure:
    """Azure's own 429 (a deployment's quota) and 401; the rest passes through from the model
    service in OpenAI's shape."""

    mount = AZURE_MOUNT
    catalog: ClassVar[tuple[str, ...]] = ("azure",)

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        return azure_authenticate(request, keys)

    def parse(self, call: Call) -> None:
        classic_path(call)
        super().parse(call)  # type: ignore[misc]

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            seconds = max(1, round(retry_after))
            message = (
                "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
                "v1 have exceeded token rate limit of your current AIServices S0 pricing tier. "
                f"Please retry after {seconds} seconds."
            )
            headers = {"retry-after": str(seconds), "x-ratelimit-remaining-tokens": "0"}
            return JsonReply(429, {"error": {"code": "429", "message": message}}, headers)
        if kind == "auth":
            return _azure_401(INVALID_KEY)
        reply: JsonReply = super().fault(kind, request, retry_after)  # type: ignore[misc]
        return reply

    def serves(self, env: Any, model: str) -> bool:
        return True  # an Azure deployment's name is its owner's choice

    def listed(self, call: Any) -> tuple[str, ...]:
        return ("azure",)


class AzureChat(OnAzure, Chat):
    name = "azure"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", AZURE_MOUNT + "/openai/v1/chat/completions", "chat"),
        ("POST", AZURE_MOUNT + DEPLOYMENT + "/chat/completions", "chat"),
        ("GET", AZURE_MOUNT + "/openai/v1/models", "models"),
        ("GET", AZURE_MOUNT + "/openai/v1/models/(?P<model>.+)", "model"),
    )

    def headers(self, request: HttpRequest) -> dict[str, str]:
        return {**super().headers(request), **apim_headers(request)}

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> dict[str, Any]:
        return filtered(super().render(call, prompt, reply, ids))

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        return [prompt_filter_chunk(), *super().frames(call, rendered, reply, ids)]

    def chunk(self, data: dict[str, Any]) -> dict[str, Any]:
        """The filter's verdict on each choice (on the text it carries: else ``{}``)."""
        for choice in data["choices"]:
            delta = choice.get("delta") or {}
            said = delta.get("content") or delta.get("refusal")
            choice["content_filter_results"] = STREAMED_FILTERS if said else {}
        return data


class AzureResponses(OnAzure, Responses):
    name = "azure_responses"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", AZURE_MOUNT + "/openai/v1/responses", "responses"),
        ("POST", AZURE_MOUNT + "/openai/responses", "responses"),
    )


CLOUD = (VertexGemini, VertexAnthropic, AzureChat, AzureResponses)
