"""Every embedding codec's answer and error answer with one place changed (another type, a
lone surrogate, a number out of range, removed) is read or refused with a classified error,
never a bare TypeError or ValueError: what an embedding API answers is decoded sans-IO here,
as the embedder decodes it (metis.adapter.embedder)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from metis.errors import AdapterError, ErrorClass
from metis.wire.embeddings.base import EmbedBatch, EmbedCodec
from metis.wire.embeddings.bedrock import BedrockEmbeddings
from metis.wire.embeddings.cohere import CohereEmbeddings
from metis.wire.embeddings.google import GeminiEmbeddings, VertexEmbeddings
from metis.wire.embeddings.ollama import OllamaEmbeddings
from metis.wire.embeddings.openai import OpenAIEmbeddings
from tests.json_mutation import changed, paths

OTHERS: list[Any] = [None, 0, -1, 1.5, True, 10**30, "x", "\ud800", "12", [], [1], {}, {"a": 1}]
TWO = EmbedBatch(("a", "b"), "m")
COHERE_TWO = {"embeddings": {"float": [[0.1], [0.2]]}}
ANSWERS: list[tuple[EmbedCodec, EmbedBatch, dict[str, Any]]] = [
    (
        OpenAIEmbeddings(),
        TWO,
        {
            "data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [0.2]}],
            "model": "m",
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        },
    ),
    (GeminiEmbeddings(), TWO, {"embeddings": [{"values": [0.1]}, {"values": [0.2]}]}),
    (
        VertexEmbeddings(),
        TWO,
        {
            "predictions": [
                {"embeddings": {"values": [0.1], "statistics": {"token_count": 2}}},
                {"embeddings": {"values": [0.2], "statistics": {"token_count": 2}}},
            ],
            "deployedModelId": "d",
        },
    ),
    (
        BedrockEmbeddings(),
        EmbedBatch(("a",), "amazon.titan-embed-text-v2:0"),
        {"embedding": [0.1], "inputTextTokenCount": 2},
    ),
    (BedrockEmbeddings(), EmbedBatch(("a", "b"), "cohere.embed-v4"), COHERE_TWO),
    (CohereEmbeddings(), TWO, {**COHERE_TWO, "meta": {"billed_units": {"input_tokens": 3}}}),
    (OllamaEmbeddings(), TWO, {"model": "m", "embeddings": [[0.1], [0.2]], "prompt_eval_count": 3}),
]
ERRORS: list[dict[str, Any]] = [
    {"error": {"message": "m", "type": "t", "code": "c", "param": None}},
    {
        "error": {
            "code": 429,
            "message": "m",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "t", "reason": "API_KEY_INVALID", "retryDelay": "3s"}],
        }
    },
    {"message": "m", "__type": "ThrottlingException"},
    {"detail": "d"},
]


def _named(codec: EmbedCodec, batch: EmbedBatch) -> str:
    return f"{codec.name}:{batch.model}"


@pytest.mark.parametrize(
    ("codec", "batch", "answer"), ANSWERS, ids=[_named(*a[:2]) for a in ANSWERS]
)
def test_an_answer_with_one_place_changed_is_read_or_a_classified_error(
    codec: EmbedCodec, batch: EmbedBatch, answer: dict[str, Any]
) -> None:
    for at in paths(answer):
        for other in [*OTHERS, "removed"] if at else OTHERS:
            mutated = (
                changed(answer, at, None, remove=True)
                if other == "removed"
                else (changed(answer, at, other))
            )
            if not isinstance(mutated, dict):
                continue
            with contextlib.suppress(AdapterError):
                codec.decode(mutated, {}, batch)


@pytest.mark.parametrize("codec", [a[0] for a in ANSWERS[::2]], ids=lambda c: c.name)
def test_an_error_answer_with_one_place_changed_is_a_classified_error(codec: EmbedCodec) -> None:
    """Google's ``details`` not a list was a bare TypeError (``'int' object is not
    iterable``), hiding the API's status behind it."""
    for error in ERRORS:
        for at in paths(error):
            for other in OTHERS:
                body = json.dumps(changed(error, at, other)).encode()
                for status in (400, 429, 503):
                    assert isinstance(codec.error_from_http(status, {}, body), AdapterError)


def test_a_google_error_whose_details_are_not_a_list_keeps_its_status() -> None:
    body = {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    body["error"]["details"] = 5
    error = GeminiEmbeddings().error_from_http(429, {}, json.dumps(body).encode())
    assert error.error_class is ErrorClass.RATE_LIMIT and "slow down" in str(error)


@pytest.mark.parametrize("said", ["\xb2", "1\xb2"])
def test_a_bedrock_token_count_header_of_other_digits_is_no_count(said: str) -> None:
    """``'²'.isdigit()`` is true and ``int('²')`` a ValueError: a header of such bytes (read
    as Latin-1) failed the whole answer."""
    codec, batch, answer = ANSWERS[4]
    header = {"x-amzn-bedrock-input-token-count": said}
    read = codec.decode(answer, header, batch)
    assert read.input_tokens is None and len(read.vectors) == 2
