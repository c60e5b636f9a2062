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
    COHERE_INPUT_TYPES,
    served,
    sized,
    text_list,
    tokens_of,
    unit_vector,
)
from metis.testing.emulator.formats.gemini import Gemini
from metis.testing.emulator.formats.ollama import JSON, Ollama
from metis.testing.emulator.rules import Refused, names
from metis.testing.emulator.wire import HttpRequest, JsonReply

TASK_TYPES = names(
    "RETRIEVAL_QUERY RETRIEVAL_DOCUMENT SEMANTIC_SIMILARITY CLASSIFICATION CLUSTERING "
    "QUESTION_ANSWERING FACT_VERIFICATION CODE_RETRIEVAL_QUERY"
)


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

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        return True

    def parse(self, call: Call) -> None:
        call.model = model = call.match["model"]
        single = call.match["method"] == "embedContent"
        requests = [call.body] if single else call.body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise Refused("* BatchEmbedContentsRequest.requests: requests is required")
        if len(requests) > 100:
            raise Refused(
                "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch"
            )
        texts, sizes = [], set()
        for i, one in enumerate(requests):
            if not isinstance(one, dict):
                raise Refused(f"requests[{i}]: expected an object")
            if not single and one.get("model") != f"models/{model}":
                raise Refused(
                    f"Model name in requests[{i}] does not match the model in the URL: "
                    f"models/{model}"
                )
            if one.get("taskType", TASK_TYPES[0]) not in TASK_TYPES:
                raise Refused(f"Invalid value at 'requests[{i}].task_type'")
            parts = (one.get("content") or {}).get("parts")
            if not isinstance(parts, list) or not parts:
                raise Refused(f"requests[{i}].content.parts: must not be empty")
            texts.append(_content_key(parts))
            sizes.add(sized("google", model, one.get("outputDimensionality")))
        call.options.update(texts=texts, size=sizes.pop(), single=single)

    def serve(self, call: Call) -> JsonReply | None:
        if not served(call.env, ("google",), call.model):
            raise self.unknown_model(call.model)
        vectors = [
            {"values": unit_vector(call.model, t, call.options["size"])}
            for t in call.options["texts"]
        ]
        body = {"embedding": vectors[0]} if call.options["single"] else {"embeddings": vectors}
        return JsonReply(200, body, {"content-type": "application/json; charset=UTF-8"})


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
        if not isinstance(instances, list) or not instances:
            raise Refused("instances: must be a non-empty list")
        if len(instances) > limit:
            raise Refused(
                f"The model {model} supports at most {limit} instances a request, "
                f"got {len(instances)}"
            )
        texts = []
        for i, instance in enumerate(instances):
            content = instance.get("content") if isinstance(instance, dict) else None
            if not isinstance(content, str) or not content:
                raise Refused(f"instances[{i}].content: must be a non-empty string")
            if instance.get("task_type", TASK_TYPES[0]) not in TASK_TYPES:
                raise Refused(f"instances[{i}].task_type: invalid")
            texts.append(content)
        parameters = call.body.get("parameters") or {}
        size = sized("google-vertex", model, parameters.get("outputDimensionality"))
        call.options.update(texts=texts, size=size)

    def serve(self, call: Call) -> JsonReply | None:
        if not served(call.env, ("google-vertex",), call.model):
            raise self.unknown_model(call.model)
        predictions = [
            {
                "embeddings": {
                    "values": unit_vector(call.model, t, call.options["size"]),
                    "statistics": {"token_count": tokens_of(t), "truncated": False},
                }
            }
            for t in call.options["texts"]
        ]
        billed = sum(len(t) for t in call.options["texts"])
        body = {"predictions": predictions, "metadata": {"billableCharacterCount": billed}}
        return JsonReply(200, body, {"content-type": "application/json; charset=UTF-8"})


class BedrockEmbeddings(Bedrock):
    name = "bedrock"
    routes: ClassVar[Sequence[Route]] = (("POST", r"/model/(?P<model>[^/]+)/invoke", "model"),)

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        return "embed" in unquote(request.path)

    def parse(self, call: Call) -> None:
        call.model = model = unquote(call.match["model"]).rsplit("/", 1)[-1]
        body = call.body
        if "titan-embed" in model:
            text = body.get("inputText")
            if not isinstance(text, str) or not text:
                raise Refused("Malformed input request: #: required key [inputText] not found")
            extra = set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"}
            if extra:
                raise Refused(
                    f"Malformed input request: #: extraneous key [{extra.pop()}] is not permitted"
                )
            if "dimensions" in body and "v2" not in model:
                raise Refused(
                    "Malformed input request: #: extraneous key [dimensions] is not permitted"
                )
            size = sized("amazon-bedrock", model, body.get("dimensions"))
            call.options.update(texts=[text], size=size, family="titan")
            return
        if body.get("input_type") not in COHERE_INPUT_TYPES:
            raise Refused("Malformed input request: #: required key [input_type] not found")
        texts = text_list(body.get("texts"), "texts", 96)
        size = sized("amazon-bedrock", model, body.get("output_dimension"))
        call.options.update(texts=texts, size=size, family="cohere")

    def serve(self, call: Call) -> JsonReply | None:
        if not served(call.env, ("amazon-bedrock",), call.model):
            raise self.unknown_model(call.model)
        texts, size = call.options["texts"], call.options["size"]
        used = sum(tokens_of(t) for t in texts)
        headers = {
            "content-type": "application/json",
            "x-amzn-bedrock-input-token-count": str(used),
        }
        if call.options["family"] == "titan":
            body: dict[str, Any] = {
                "embedding": unit_vector(call.model, texts[0], size),
                "inputTextTokenCount": used,
            }
        else:
            vectors = [unit_vector(call.model, t, size) for t in texts]
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
        call.model = str(call.body.get("model") or "")
        if not call.model:
            raise Refused("model is required")
        call.options["texts"] = text_list(call.body.get("input"), "input", None)
        call.options["size"] = sized("", call.model, call.body.get("dimensions"))

    def serves(self, env: Any, model: str) -> bool:
        return served(env, (), model) or "embed" in model or "minilm" in model

    def serve(self, call: Call) -> Any:
        if not self.serves(call.env, call.model):
            raise self.unknown_model(call.model)
        texts, size = call.options["texts"], call.options["size"]
        body = {
            "model": call.model,
            "embeddings": [unit_vector(call.model, t, size) for t in texts],
            "total_duration": 14143917,
            "load_duration": 1019500,
            "prompt_eval_count": sum(tokens_of(t) for t in texts),
        }
        return JsonReply(200, body, dict(JSON))


EMBEDDINGS = (GeminiEmbeddings, VertexEmbeddings, BedrockEmbeddings, OllamaEmbeddings)
