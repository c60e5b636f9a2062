"""An ``{"error": ...}`` line inside Ollama's NDJSON stream (a 200 whose headers went out
before the failure) is classified as the same failure answered with its own HTTP status is:
by what it says (a missing model, a model without the capability, a prompt past the context
length, a busy server, too many requests, a model that does not fit in memory) and by a
``status`` the line carries. The text that arrived before it is kept. Sans-IO."""

from __future__ import annotations

import json

import pytest

from metis.errors import (
    AdapterError,
    CapabilityError,
    ContextOverflowError,
    InvalidRequestError,
    OverloadedError,
    RateLimitError,
    ServerError,
)
from metis.wire.builder import MessageBuilder
from metis.wire.ollama import codec

MODEL = "ollama:qwen3:8b"
LINE = {"model": "qwen3:8b", "message": {"role": "assistant", "content": "Part"}, "done": False}

SAID = [
    # (what the line says, Ollama's status for it when answered before the stream, class)
    ("model 'qwen3:8b' not found", 404, InvalidRequestError, False),
    ("registry.ollama.ai/library/gemma3:1b does not support tools", 400, CapabilityError, False),
    ("input length exceeds the context length", 400, ContextOverflowError, False),
    ("the input length (9000 tokens) exceeds the model's context length", 400,
     ContextOverflowError, False),
    ("server busy, please try again.  maximum pending requests exceeded", 503,
     OverloadedError, True),
    ("model requires more system memory (5.5 GiB) than is available (3.2 GiB)", 500,
     ServerError, False),
    ("llama runner process has terminated: exit status 2", 500, ServerError, True),
    ("429 Too Many Requests", 429, RateLimitError, True),
    ("too many requests, please slow down", 429, RateLimitError, True),
    ("you've reached your weekly usage limit, please wait or upgrade to continue", 429,
     RateLimitError, True),  # Ollama's cloud models
    ("rate limit exceeded", 429, RateLimitError, True),
]  # fmt: skip


def _raised_in_stream(line: dict[str, object]) -> AdapterError:
    builder = MessageBuilder("ollama", MODEL)
    parser = codec.stream_parser(builder)
    parser.feed(LINE)
    with pytest.raises(AdapterError) as caught:
        parser.feed(line)
    assert builder.output_text() == ["Part"]  # what arrived before the error is kept
    return caught.value


@pytest.mark.parametrize(("said", "status", "cls", "retryable"), SAID)
def test_an_error_line_is_classified_as_its_answer_with_a_status_is(
    said: str, status: int, cls: type[AdapterError], retryable: bool
) -> None:
    streamed = _raised_in_stream({"error": said})
    answered = codec.error_from_http(status, {}, json.dumps({"error": said}).encode())
    assert type(streamed) is type(answered) is cls
    assert streamed.retryable is answered.retryable is retryable
    assert streamed.provider_message == said and streamed.provider_status is None


@pytest.mark.parametrize(
    ("status", "said", "cls"),
    [
        (400, "model is required", InvalidRequestError),
        (404, "no such thing", InvalidRequestError),
        (503, "try later", ServerError),
    ],
)
def test_a_status_on_the_error_line_classifies_it(
    status: int, said: str, cls: type[AdapterError]
) -> None:
    error = _raised_in_stream({"error": said, "status": status})
    answered = codec.error_from_http(status, {}, json.dumps({"error": said}).encode())
    assert type(error) is type(answered) is cls
    assert error.provider_status == status and error.retryable is answered.retryable


@pytest.mark.parametrize("status", ["400", 99, 700, True, None])
def test_a_status_that_is_not_an_http_error_status_is_not_read(status: object) -> None:
    error = _raised_in_stream({"error": "something broke", "status": status})
    assert type(error) is ServerError and error.provider_status is None
