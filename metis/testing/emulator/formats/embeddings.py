"""The embeddings endpoints of OpenAI's shape and Cohere's:

- ``POST /v1/embeddings``: OpenAI (platform.openai.com/docs/api-reference/embeddings), and the
  services that copy it on their own hosts: Mistral (``output_dimension``), Voyage
  (``input_type``, ``truncation``, ``output_dimension``) and any OpenAI-compatible server; the
  keys each takes are its own (an unknown one is OpenAI's 400);
- ``POST /azure/openai/v1/embeddings``: the same on Azure's v1 API, with Azure's auth;
- ``POST /v2/embed``: Cohere (docs.cohere.com/reference/embed), 96 texts a request,
  ``input_type`` required, errors as ``{id, message}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from metis.catalog.embedding_models import embedding_model
from metis.testing.emulator.formats.azure_shapes import DEPLOYMENT
from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.formats.chat import Chat
from metis.testing.emulator.formats.cloud import AZURE_MOUNT, OnAzure
from metis.testing.emulator.formats.embedding_vectors import (
    as_base64,
    embedded,
    served,
    size_of,
    sized,
    text_list,
    used,
)
from metis.testing.emulator.rules import Refused, check, table
from metis.testing.emulator.wire import Frame, HttpRequest, JsonReply

RULES = table("embeddings")
COHERE_RULES = table("cohere")


def _family(model: str) -> str:
    if model.startswith("voyage"):
        return "voyage"
    if model.startswith(("mistral", "codestral")):
        return "mistral"
    return "openai"


class OpenAIEmbeddings(Chat):
    name = "openai"
    routes: ClassVar[Sequence[Route]] = (("POST", r"/v1/embeddings", "embeddings"),)
    catalog: ClassVar[tuple[str, ...]] = ("openai", "voyage", "mistral", "*")

    def parse(self, call: Call) -> None:
        check(RULES, call.body)
        body = call.body
        call.model = model = str(body["model"])
        family = _family(model)
        call.options["texts"] = text_list(body["input"])
        info = embedding_model(family, model)  # the family is its catalog's name
        asked = body.get("output_dimension" if family != "openai" else "dimensions")
        fixed = info is not None and info.min_dimensions is None and info.dimension_choices is None
        if asked is not None and fixed:
            raise Refused("This model does not support specifying dimensions.", "dimensions")
        call.options["size"] = sized(family, model, asked)

    def serves(self, env: Any, model: str) -> bool:
        return served(env, self.catalog, model)

    def serve(self, call: Call) -> JsonReply | None:
        encode: Any = as_base64 if call.body.get("encoding_format") == "base64" else list
        data = [
            {"object": "embedding", "index": index, "embedding": encode(vector)}
            for index, vector in enumerate(embedded(self, call))
        ]
        tokens = used(call)
        usage = {"total_tokens": tokens}
        if _family(call.model) != "voyage":
            usage = {"prompt_tokens": tokens, **usage}
        body = {"object": "list", "data": data, "model": call.model, "usage": usage}
        headers = {"content-type": "application/json", **self.headers(call.request)}
        return JsonReply(200, body, headers)


class AzureEmbeddings(OnAzure, OpenAIEmbeddings):
    name = "azure"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", AZURE_MOUNT + "/openai/v1/embeddings", "embeddings"),
        ("POST", AZURE_MOUNT + DEPLOYMENT + "/embeddings", "embeddings"),
    )


_COHERE_FAULTS = {
    "rate_limit": (429, "You are using a Trial key, which is limited to 100 API calls / minute."),
    "overloaded": (503, "the service is overloaded, please try again later"),
    "server_error": (500, "internal server error, this has been reported to our developers"),
    "auth": (401, "invalid api token"),
    "context_overflow": (400, "too many tokens: the input exceeds the model's limit"),
}


class Cohere(Format):
    name = "cohere"
    routes: ClassVar[Sequence[Route]] = (("POST", r"/v2/embed", "embed"),)
    catalog: ClassVar[tuple[str, ...]] = ("cohere",)
    too_long = _COHERE_FAULTS["context_overflow"][1]
    no_model = (404, "model '{model}' not found, make sure the correct model ID was used")

    def _error(self, status: int, message: str) -> JsonReply:
        return JsonReply(status, {"id": "emulated", "message": message})

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        token = request.bearer()
        if token and (keys is None or token in keys):
            return None
        return self._error(401, "invalid api token" if token else "no api key supplied")

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        return self._error(refused.status, refused.message)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        return self._error(*_COHERE_FAULTS.get(kind, _COHERE_FAULTS["server_error"]))

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        return []

    def parse(self, call: Call) -> None:
        check(COHERE_RULES, call.body)
        body = call.body
        call.model = str(body["model"])
        if "inputs" in body:
            call.options["texts"] = [repr(item) for item in body["inputs"]]
        else:
            call.options["texts"] = text_list(body["texts"])
        info = embedding_model("cohere", call.model)
        default = info.dimensions if info is not None else 1024
        choices = info.dimension_choices if info is not None else None
        call.options["size"] = size_of(body.get("output_dimension"), default, choices, None)

    def serve(self, call: Call) -> JsonReply | None:
        texts = call.options["texts"]
        body = {
            "id": "emulated",
            "embeddings": {"float": embedded(self, call, self.catalog)},
            "texts": list(texts),
            "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": used(call)}},
            "response_type": "embeddings_by_type",
        }
        return JsonReply(200, body, {"content-type": "application/json"})
