"""The embeddings endpoints of Google, AWS and Ollama:

- Gemini API ``POST /v1beta/models/{m}:batchEmbedContents`` (and ``:embedContent``;
  ai.google.dev/api/embeddings): at most 100 requests a batch, each naming the same model;
  no token count in the answer;
- Vertex AI ``POST .../publishers/google/models/{m}:predict``: instances (one for
  gemini-embedding-001, 250 for the others), ``statistics.token_count`` per prediction;
- Bedrock ``POST /model/{id}/invoke`` for ``amazon.titan-embed-*`` (one ``inputText``) and
  ``cohere.embed-*`` (96 ``texts``, ``input_type`` required), SigV4 or a Bedrock API key;
- Ollama ``POST /api/embed``: ``input`` a text or a list, ``embeddings`` always 2-D.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import unquote

from metis.catalog.embedding_models import embedding_model
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.bedrock import Bedrock
from metis.testing.emulator.formats.cloud import VERTEX, OnVertex
from metis.testing.emulator.formats.embedding_vectors import (
    embedded,
    served,
    sized,
    text_list,
    tokens_of,
    used,
)
from metis.testing.emulator.formats.gemini import GOOGLE_JSON, Gemini
from metis.testing.emulator.formats.ollama import JSON, Ollama
from metis.testing.emulator.rules import Refused, check, table
from metis.testing.emulator.wire import HttpRequest, JsonReply


def _same_model(body: dict[str, Any], call: Call) -> None:
    if call.match["method"] == "embedContent":
        return
    for i, one in enumerate(body["requests"]):
        if one.get("model") != f"models/{call.model}":
            raise Refused(
                f"Model name in requests[{i}] does not match the model in the URL: "
                f"models/{call.model}"
            )


GEMINI_RULES = table("gemini_embed", {"same model": _same_model})
VERTEX_RULES = table("vertex_embed")
TITAN_RULES = table("bedrock_titan")
COHERE_RULES = table("bedrock_cohere")
OLLAMA_RULES = table("ollama_embed")
_BEDROCK = ("amazon-bedrock",)


def _content_key(parts: list[Any]) -> str:
    """What a vector is made from: a lone text part's text (so a test can compute it), else
    the parts as written."""
    if len(parts) == 1 and isinstance(parts[0], dict) and isinstance(parts[0].get("text"), str):
        return str(parts[0]["text"])
    return repr(parts)


class GeminiEmbeddings(Gemini):
    name = "gemini"
    routes: ClassVar[Sequence[Route]] = (
        (
            "POST",
            r"/(v1|v1beta)/models/(?P<model>[^/:]+):(?P<method>batchEmbedContents|embedContent)",
            "embed",
        ),
    )

    def parse(self, call: Call) -> None:
        call.model = model = call.match["model"]
        single = call.match["method"] == "embedContent"
        body = {"requests": [call.body]} if single else call.body
        check(GEMINI_RULES, body, call)
        texts = [_content_key(one["content"]["parts"]) for one in body["requests"]]
        sizes = {
            sized("google", model, one.get("outputDimensionality")) for one in body["requests"]
        }
        call.options.update(texts=texts, size=sizes.pop(), single=single)

    def serve(self, call: Call) -> JsonReply | None:
        vectors = [{"values": vector} for vector in embedded(self, call, ("google",))]
        body = {"embedding": vectors[0]} if call.options["single"] else {"embeddings": vectors}
        return JsonReply(200, body, dict(GOOGLE_JSON))


class VertexEmbeddings(OnVertex, GeminiEmbeddings):
    name = "vertex"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", VERTEX + r"/google/models/(?P<model>[^/:]+):predict", "predict"),
    )

    def parse(self, call: Call) -> None:
        call.model = model = call.match["model"]
        instances = call.body.get("instances")
        info = embedding_model("google-vertex", model)
        limit = info.max_inputs if info is not None and info.max_inputs else 250
        if isinstance(instances, list) and len(instances) > limit:
            raise Refused(
                f"The model {model} supports at most {limit} instances a request, "
                f"got {len(instances)}"
            )
        check(VERTEX_RULES, call.body)
        texts = [instance["content"] for instance in call.body["instances"]]
        parameters = call.body.get("parameters") or {}
        size = sized("google-vertex", model, parameters.get("outputDimensionality"))
        call.options.update(texts=texts, size=size)

    def serve(self, call: Call) -> JsonReply | None:
        texts = call.options["texts"]
        vectors = embedded(self, call, ("google-vertex",))
        stats = [{"token_count": tokens_of(text), "truncated": False} for text in texts]
        predictions = [
            {"embeddings": {"values": v, "statistics": s}}
            for v, s in zip(vectors, stats, strict=True)
        ]
        billed = sum(len(t) for t in texts)
        body = {"predictions": predictions, "metadata": {"billableCharacterCount": billed}}
        return JsonReply(200, body, dict(GOOGLE_JSON))


class BedrockEmbeddings(Bedrock):
    name = "bedrock"
    routes: ClassVar[Sequence[Route]] = (("POST", r"/model/(?P<model>[^/]+)/invoke", "model"),)

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        return "embed" in unquote(request.path)

    def parse(self, call: Call) -> None:
        call.model = model = unquote(call.match["model"]).rsplit("/", 1)[-1]
        body = call.body
        if "titan-embed" in model:
            check(TITAN_RULES, body)
            if "dimensions" in body and "v2" not in model:
                raise Refused(
                    "Malformed input request: #: extraneous key [dimensions] is not permitted"
                )
            size = sized("amazon-bedrock", model, body.get("dimensions"))
            call.options.update(texts=[body["inputText"]], size=size, family="titan")
            return
        check(COHERE_RULES, body)
        size = sized("amazon-bedrock", model, body.get("output_dimension"))
        call.options.update(texts=text_list(body["texts"]), size=size, family="cohere")

    def serve(self, call: Call) -> JsonReply | None:
        texts, vectors, tokens = call.options["texts"], embedded(self, call, _BEDROCK), used(call)
        headers = {
            "content-type": "application/json",
            "x-amzn-bedrock-input-token-count": str(tokens),
        }
        if call.options["family"] == "titan":
            body: dict[str, Any] = {"embedding": vectors[0], "inputTextTokenCount": tokens}
        else:
            v4 = "v4" in call.model or "embedding_types" in call.body
            body = {
                "id": "emulated",
                "embeddings": {"float": vectors} if v4 else vectors,
                "texts": texts,
                "response_type": "embeddings_by_type" if v4 else "embeddings_floats",
            }
        return JsonReply(200, body, headers)


class OllamaEmbeddings(Ollama):
    name = "ollama"
    routes: ClassVar[Sequence[Route]] = (("POST", "/api/embed", "embed"),)

    def parse(self, call: Call) -> None:
        check(OLLAMA_RULES, call.body)
        call.model = str(call.body["model"])
        call.options["texts"] = text_list(call.body["input"])
        call.options["size"] = sized("", call.model, call.body.get("dimensions"))

    def serves(self, env: Any, model: str) -> bool:
        return served(env, (), model) or "embed" in model or "minilm" in model

    def serve(self, call: Call) -> Any:
        body = {
            "model": call.model,
            "embeddings": embedded(self, call),
            "total_duration": 14143917,
            "load_duration": 1019500,
            "prompt_eval_count": used(call),
        }
        return JsonReply(200, body, dict(JSON))


EMBEDDINGS = (GeminiEmbeddings, VertexEmbeddings, BedrockEmbeddings, OllamaEmbeddings)
