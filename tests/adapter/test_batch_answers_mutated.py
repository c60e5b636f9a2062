"""A batch's status answer and its results with one place changed (another type, a lone
surrogate, a count that is not one, a URL that is not one, removed) are read or refused with a
classified error, at every step a caller takes: ``status``, ``results``, and looking an id up
in the results (which reads the status's counts). The default run takes a seeded sample of
the places of each API; the slow run every place."""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.adapter.batches import Batches
from metis.errors import AdapterError
from tests.json_mutation import changed, paths

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]

OTHERS: list[Any] = [None, -1, 1.5, True, "x", "\ud800", "12", [], [1], {"a": 1}, "ftp://h/x"]
CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
GEMINI = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
    "modelVersion": "gemini-2.0-flash",
}
BAD_REQUEST = {"message": "bad", "type": "invalid_request_error"}
OPENAI = (
    "openai",
    "batch_1",
    {
        "id": "batch_1",
        "status": "completed",
        "output_file_id": "file_out",
        "error_file_id": "file_err",
        "request_counts": {"total": 3, "completed": 2, "failed": 1},
        "errors": {"data": [{"code": "invalid_request", "message": "bad", "line": 2}]},
    },
    [
        {"custom_id": "a", "response": {"status_code": 200, "body": CHAT}, "error": None},
        {"custom_id": "b", "response": {"status_code": 400, "body": {"error": BAD_REQUEST}}},
    ],
)
ANTHROPIC = (
    "anthropic",
    "msgbatch_1",
    {
        "id": "msgbatch_1",
        "processing_status": "ended",
        "request_counts": {"processing": 0, "succeeded": 1, "errored": 1, "canceled": 0},
        "results_url": "https://api.anthropic.com/v1/messages/batches/msgbatch_1/results",
    },
    [
        {"custom_id": "a", "result": {"type": "succeeded", "message": MESSAGE}},
        {
            "custom_id": "b",
            "result": {"type": "errored", "error": {"type": "error", "error": BAD_REQUEST}},
        },
    ],
)
GEMINI_BATCH = (
    "gemini",
    "b1",
    {
        "name": "batches/b1",
        "metadata": {
            "state": "BATCH_STATE_SUCCEEDED",
            "batchStats": {"requestCount": "2", "successfulRequestCount": "1"},
        },
        "error": {"code": 3, "message": "one request failed"},
        "response": {
            "inlinedResponses": {
                "inlinedResponses": [
                    {"response": GEMINI, "metadata": {"key": "a"}},
                    {"error": {"code": 400, "message": "bad"}, "metadata": {"key": "b"}},
                ]
            }
        },
    },
    [],
)
APIS = [OPENAI, ANTHROPIC, GEMINI_BATCH]


def batches(stack: str, status: dict[str, Any], lines: list[Any]) -> Batches:
    """A Batches whose status answer is ``status`` and whose results file is ``lines``."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in ("http", "https"):  # as httpx's own transports refuse it
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol: {request.url}"
            )
        if request.url.path.endswith(("/content", "/results")):
            return httpx.Response(200, content=b"\n".join(json.dumps(x).encode() for x in lines))
        return httpx.Response(200, content=json.dumps(status).encode())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return Batches(build_adapter(stack, api_key="k", http_client=client))


async def follow(stack: str, batch_id: str, status: dict[str, Any], lines: list[Any]) -> None:
    """Each step a caller takes; any failure but a classified one fails the test."""
    following = batches(stack, status, lines)
    try:
        await following.status(batch_id)
        results = await following.results(batch_id)
    except AdapterError as error:
        results = getattr(error, "partial_results", None)
        if results is None:
            return
    for key in ("a", "b", "unknown"):
        try:
            item = results[key]
        except AdapterError:
            continue
        assert item.response is not None or isinstance(item.error, AdapterError)


def mutations() -> list[tuple[str, str, dict[str, Any], list[Any], str]]:
    """Every (API, status, lines) with one place of the status or of a line changed."""
    found = []
    for stack, batch_id, status, lines in APIS:
        for at in paths(status):
            for other in OTHERS:
                found.append((stack, batch_id, changed(status, at, other), lines, f"status{at}"))
        for n, line in enumerate(lines):
            for at in paths(line):
                for other in OTHERS:
                    mutated = [*lines[:n], changed(line, at, other), *lines[n + 1 :]]
                    found.append((stack, batch_id, status, mutated, f"line {n}{at}"))
    return found


ALL = mutations()
SAMPLE = random.Random(12).sample(ALL, 120)


@pytest.mark.parametrize("case", [pytest.param(SAMPLE, id="sample")])
async def test_a_sample_of_answers_changed_in_one_place_are_read_or_classified(
    case: list[tuple[str, str, dict[str, Any], list[Any], str]],
) -> None:
    for stack, batch_id, status, lines, _ in case:
        await follow(stack, batch_id, status, lines)


@pytest.mark.slow
async def test_every_answer_changed_in_one_place_is_read_or_classified() -> None:
    for stack, batch_id, status, lines, _ in ALL:
        await follow(stack, batch_id, status, lines)


@pytest.mark.parametrize("count", ["x", [1], {"a": 1}, "\ud800", True])
async def test_an_anthropic_count_that_is_no_number_is_no_count(count: object) -> None:
    """``sum`` of the failed counts was a bare TypeError (int + str)."""
    _, batch_id, status, lines = ANTHROPIC
    status = changed(status, ("request_counts", "errored"), count)
    read = await batches("anthropic", status, lines).status(batch_id)
    assert (read.total, read.succeeded, read.failed) == (1, 1, 0)


@pytest.mark.parametrize("count", ["x", [1], {"a": 1}, True, -3])
async def test_an_openai_total_that_is_no_count_leaves_a_lookup_classified(count: object) -> None:
    """The total is read when an id is missing: a string there was a bare TypeError (str > int)
    from ``results['unknown']``, not the MissingResult (a KeyError and an AdapterError)."""
    _, batch_id, status, lines = OPENAI
    following = batches("openai", changed(status, ("request_counts", "total"), count), lines)
    read = await following.results(batch_id)
    assert read.status.total is None
    with pytest.raises(KeyError, match="no result for 'unknown'"):
        read["unknown"]


async def test_an_anthropic_result_type_that_is_no_word_is_that_items_error() -> None:
    """``kind not in _OUTCOMES`` with a list for ``type``: a bare TypeError (unhashable)."""
    _, batch_id, status, lines = ANTHROPIC
    odd = changed(lines[0], ("result", "type"), ["succeeded"])
    read = await batches("anthropic", status, [odd, lines[1]]).results(batch_id)
    assert read["a"].outcome == "errored" and "unknown type" in str(read["a"].error)
    assert read["b"].outcome == "errored"
