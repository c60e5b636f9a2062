"""The embedding codecs against the providers' documented request and response samples, and
their error bodies classified; the embedding stacks as they load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metis.adapter.embed_checks import Limits, split
from metis.errors import ConfigError, ErrorClass, ProtocolError, StackError
from metis.model.embeddings import ImageInput
from metis.stacks.embedding import builtin_embedding_stacks, load_embedding_stack
from metis.wire.embeddings import CODECS, EmbedBatch, embedding_codec

pytestmark = pytest.mark.backend_independent


def batch(*inputs: Any, model: str = "m", **options: Any) -> EmbedBatch:
    return EmbedBatch(tuple(inputs), model, **options)


def test_openai_request_and_documented_response() -> None:
    codec = embedding_codec("openai")
    body = codec.encode(batch("a", "b", model="text-embedding-3-small", dimensions=256))
    assert body == {
        "model": "text-embedding-3-small",
        "input": ["a", "b"],
        "encoding_format": "float",
        "dimensions": 256,
    }
    # platform.openai.com/docs/api-reference/embeddings/create (response sample), data reordered
    answer = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.3, 0.4]},
            {"object": "embedding", "index": 0, "embedding": [0.0023064255, -0.009327292]},
        ],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 8, "total_tokens": 8},
    }
    read = codec.decode(answer, {}, batch("a", "b"))
    assert read.vectors == [[0.0023064255, -0.009327292], [0.3, 0.4]]
    assert (read.input_tokens, read.model) == (8, "text-embedding-3-small")


@pytest.mark.parametrize(
    "answer",
    [
        {"data": [{"index": 0, "embedding": [1.0]}]},  # one vector for two inputs
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": "AAAA"}]},
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [float("nan")]}]},
        {"data": "nope"},
    ],
)
def test_a_malformed_openai_answer_is_a_protocol_error(answer: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError):
        embedding_codec("openai").decode(answer, {}, batch("a", "b"))


def test_mistral_and_voyage_name_the_size_output_dimension() -> None:
    assert embedding_codec("mistral").encode(batch("a", dimensions=512))["output_dimension"] == 512
    voyage = embedding_codec("voyage").encode(
        batch("a", model="voyage-3.5", dimensions=512, input_type="query", truncate=True)
    )
    # docs.voyageai.com/reference/embeddings-api
    assert voyage == {
        "model": "voyage-3.5",
        "input": ["a"],
        "output_dimension": 512,
        "truncation": True,
        "input_type": "query",
    }
    answer = {
        "object": "list",
        "data": [{"object": "embedding", "embedding": [0.1, 0.2], "index": 0}],
        "model": "voyage-3.5",
        "usage": {"total_tokens": 10},
    }
    assert embedding_codec("voyage").decode(answer, {}, batch("a")).input_tokens == 10


def test_cohere_v2_request_and_documented_response() -> None:
    codec = embedding_codec("cohere")
    body = codec.encode(batch("hello", model="embed-v4.0", input_type="query", dimensions=256))
    assert body == {
        "model": "embed-v4.0",
        "input_type": "search_query",
        "embedding_types": ["float"],
        "truncate": "NONE",
        "texts": ["hello"],
        "output_dimension": 256,
    }
    assert codec.encode(batch("x"))["input_type"] == "search_document"
    # docs.cohere.com/reference/embed (response sample)
    answer = {
        "id": "da6e531f-54c6-4a73-bf92-f60566d8d753",
        "embeddings": {"float": [[0.016296387, -0.008354187]]},
        "texts": ["hello"],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 2}},
        "response_type": "embeddings_by_type",
    }
    read = codec.decode(answer, {}, batch("hello"))
    assert (read.vectors, read.input_tokens) == ([[0.016296387, -0.008354187]], 2)
    image = codec.encode(batch("cap", ImageInput("aGk=", "image/jpeg")))
    assert image["inputs"][1] == {
        "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,aGk="}}]
    }


def test_gemini_batch_embed_contents_request_and_response() -> None:
    codec = embedding_codec("gemini")
    body = codec.encode(
        batch("a", "b", model="gemini-embedding-001", input_type="document", dimensions=768)
    )
    # ai.google.dev/api/embeddings#method:-models.batchembedcontents
    assert body["requests"][1] == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "b"}]},
        "taskType": "RETRIEVAL_DOCUMENT",
        "outputDimensionality": 768,
    }
    read = codec.decode({"embeddings": [{"values": [0.1]}, {"values": [0.2]}]}, {}, batch("a", "b"))
    assert read.vectors == [[0.1], [0.2]] and read.input_tokens is None


def test_vertex_predict_request_and_documented_response() -> None:
    codec = embedding_codec("vertex")
    body = codec.encode(batch("a", model="text-embedding-005", input_type="query", dimensions=256))
    assert body == {
        "instances": [{"content": "a", "task_type": "RETRIEVAL_QUERY"}],
        "parameters": {"autoTruncate": False, "outputDimensionality": 256},
    }
    # cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api
    answer = {
        "predictions": [
            {
                "embeddings": {
                    "statistics": {"truncated": False, "token_count": 6},
                    "values": [0.0058424929156899452, 0.011848051100969315],
                }
            }
        ]
    }
    read = codec.decode(answer, {}, batch("a"))
    assert read.vectors == [[0.0058424929156899452, 0.011848051100969315]]
    assert read.input_tokens == 6


def prediction(value: float, count: int | None) -> dict[str, Any]:
    statistics = {"truncated": False} if count is None else {"token_count": count}
    return {"embeddings": {"statistics": statistics, "values": [value]}}


@pytest.mark.parametrize(
    ("counts", "read"),
    [([0], 0), ([0, 0], 0), ([2, 0], 2), ([None], None), ([2, None], None), ([None, 2], None)],
)
def test_a_vertex_count_of_zero_is_a_count_an_absent_one_is_estimated(
    counts: list[int | None], read: int | None
) -> None:
    """Before: a reported 0 (an empty input) was read as no count, and estimated; a count
    absent from one prediction of several was read as 0 of it."""
    texts = [""] * len(counts)
    answer = {"predictions": [prediction(0.1, count) for count in counts]}
    decoded = embedding_codec("vertex").decode(answer, {}, batch(*texts))
    assert decoded.input_tokens == read


def test_bedrock_titan_and_cohere_bodies() -> None:
    codec = embedding_codec("bedrock")
    titan = batch("hi", model="amazon.titan-embed-text-v2:0", dimensions=512)
    assert codec.encode(titan) == {"inputText": "hi", "normalize": True, "dimensions": 512}
    read = codec.decode({"embedding": [0.1, 0.2], "inputTextTokenCount": 3}, {}, titan)
    assert (read.vectors, read.input_tokens) == ([[0.1, 0.2]], 3)
    assert codec.max_inputs_for("us.amazon.titan-embed-text-v2:0") == 1
    cohere = batch("a", "b", model="cohere.embed-english-v3", input_type="query")
    assert codec.encode(cohere) == {
        "input_type": "search_query",
        "embedding_types": ["float"],
        "truncate": "NONE",
        "texts": ["a", "b"],
    }
    headers = {"X-Amzn-Bedrock-Input-Token-Count": "4"}
    v3 = codec.decode({"embeddings": [[0.1], [0.2]]}, headers, cohere)
    v4 = codec.decode({"embeddings": {"float": [[0.1], [0.2]]}}, headers, cohere)
    assert v3.vectors == v4.vectors == [[0.1], [0.2]] and v3.input_tokens == 4
    assert codec.max_inputs_for("cohere.embed-english-v3") == 96
    with pytest.raises(Exception, match="neither"):
        codec.encode(batch("a", model="meta.llama3-8b"))


def test_ollama_embed_request_and_documented_response() -> None:
    codec = embedding_codec("ollama")
    assert codec.encode(batch("a", model="all-minilm")) == {
        "model": "all-minilm",
        "input": ["a"],
        "truncate": False,
    }
    # docs.ollama.com/api/embed (response sample)
    answer = {
        "model": "all-minilm",
        "embeddings": [[0.010071029, -0.0017594862]],
        "total_duration": 14143917,
        "load_duration": 1019500,
        "prompt_eval_count": 8,
    }
    read = codec.decode(answer, {}, batch("a"))
    assert (read.vectors, read.input_tokens, read.model) == (
        [[0.010071029, -0.0017594862]],
        8,
        "all-minilm",
    )


ERRORS = [
    (
        "openai",
        429,
        {},
        {"error": {"message": "Rate limit", "type": "requests", "code": "rate_limit_exceeded"}},
        ErrorClass.RATE_LIMIT,
    ),
    (
        "openai",
        400,
        {},
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens",
                "type": "invalid_request_error",
            }
        },
        ErrorClass.CONTEXT_OVERFLOW,
    ),
    (
        "mistral",
        422,
        {},
        {"detail": [{"msg": "Extra inputs are not permitted"}]},
        ErrorClass.INVALID_REQUEST,
    ),
    ("voyage", 401, {}, {"detail": "Provided API key is invalid."}, ErrorClass.AUTH),
    ("cohere", 429, {}, {"id": "x", "message": "too many requests"}, ErrorClass.RATE_LIMIT),
    ("cohere", 500, {}, {"id": "x", "message": "internal server error"}, ErrorClass.SERVER_ERROR),
    (
        "gemini",
        400,
        {},
        {
            "error": {
                "code": 400,
                "message": "API key not valid.",
                "status": "INVALID_ARGUMENT",
                "details": [{"reason": "API_KEY_INVALID"}],
            }
        },
        ErrorClass.AUTH,
    ),
    (
        "gemini",
        503,
        {},
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
        ErrorClass.OVERLOADED,
    ),
    (
        "vertex",
        429,
        {},
        {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}},
        ErrorClass.RATE_LIMIT,
    ),
    (
        "bedrock",
        400,
        {"x-amzn-errortype": "ThrottlingException"},
        {"message": "Too many requests"},
        ErrorClass.RATE_LIMIT,
    ),
    (
        "bedrock",
        403,
        {},
        {"message": "The security token included in the request is invalid."},
        ErrorClass.AUTH,
    ),
    (
        "ollama",
        404,
        {},
        {"error": 'model "x" not found, try pulling it first'},
        ErrorClass.INVALID_REQUEST,
    ),
    ("openai", 502, {}, "<html><title>Bad Gateway</title></html>", ErrorClass.SERVER_ERROR),
]


@pytest.mark.parametrize(("codec", "status", "headers", "body", "expected"), ERRORS)
def test_each_providers_error_body_is_classified(
    codec: str, status: int, headers: dict[str, str], body: Any, expected: ErrorClass
) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    error = embedding_codec(codec).error_from_http(status, headers, raw)
    assert error.error_class is expected
    assert error.provider_status == status


def test_gemini_retry_delay_is_the_wait() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "q",
            "details": [{"retryDelay": "17s"}],
        }
    }
    error = embedding_codec("gemini").error_from_http(429, {}, json.dumps(body).encode())
    assert error.retry_after_seconds == 17.0


@pytest.mark.parametrize(
    ("estimates", "limits", "chunks"),
    [
        ([1] * 5, Limits(2, None, None, 1), [range(0, 2), range(2, 4), range(4, 5)]),
        (
            [60, 60, 10, 200, 1],
            Limits(None, 100, None, 1),
            [range(0, 1), range(1, 3), range(3, 4), range(4, 5)],
        ),
        ([], Limits(2, 2, None, 1), []),
        ([5], Limits(None, None, None, 1), [range(0, 1)]),
    ],
)
def test_split_keeps_order_and_limits(
    estimates: list[int], limits: Limits, chunks: list[range]
) -> None:
    assert split(estimates, limits) == chunks


def test_every_builtin_embedding_stack_loads_with_a_known_codec() -> None:
    names = builtin_embedding_stacks()
    assert {
        "openai",
        "azure",
        "gemini",
        "vertex",
        "bedrock",
        "ollama",
        "mistral",
        "voyage",
        "cohere",
        "openai_compatible",
    } <= set(names)
    for name in names:
        assert load_embedding_stack(name).codec in CODECS


def test_extends_merges_endpoint_auth_and_limits(tmp_path: Path) -> None:
    child = tmp_path / "mine.yaml"
    child.write_text(
        "name: mine\nextends: openai\nendpoint: {base_url: 'http://h:1'}\nlimits: {max_inputs: 7}\n"
    )
    spec = load_embedding_stack(child)
    assert spec.endpoint.path == "/v1/embeddings" and spec.endpoint.base_url == "http://h:1"
    assert spec.limits.max_inputs == 7 and spec.limits.max_request_tokens == 300_000
    assert spec.auth.env == "OPENAI_API_KEY"
    azure = load_embedding_stack("azure")
    assert azure.endpoint.base_url_env is None and [s.name for s in azure.stages] == [
        "url_params",
        "azure_auth",
    ]


@pytest.mark.parametrize(
    ("text", "error", "says"),
    [
        ("name: x\nextends: openai\nstages: [retry]\n", ConfigError, "only its auth steps"),
        ("name: x\nextends: openai\ncodec: opnai\n", ConfigError, "did you mean 'openai'"),
        ("name: x\nextends: openai\nlimits: {max_inputz: 3}\n", ConfigError, "max_inputz"),
        ("name: x\nextends: nothere\n", ConfigError, "no built-in embedding stack"),
    ],
)
def test_a_bad_embedding_stack_is_a_config_error(
    tmp_path: Path, text: str, error: type[Exception], says: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(error, match=says):
        load_embedding_stack(path)


def test_an_unknown_embedding_codec_is_a_stack_error() -> None:
    with pytest.raises(StackError, match="embedding codecs"):
        embedding_codec("nope")
