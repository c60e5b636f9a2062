"""Following a batch when things go wrong. A ``wait`` past its timeout is a BatchWaitTimeout
(a metis error and a TimeoutError) naming the batch and its last status; seconds that are not
are refused before anything is asked. A results file line cut short or not JSON, or of a shape
the API does not have, is that item's ProtocolError when the line names its custom_id (every
other item kept); a line that names none fails ``results`` with a ProtocolError naming the
line, the items that were read on ``error.partial_results``."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from metis import build_adapter
from metis.adapter.batches import Batches, BatchWaitTimeout, DuplicateResult
from metis.errors import (
    AdapterError,
    AuthError,
    CapabilityError,
    InvalidRequestError,
    ProtocolError,
    ServerError,
)
from metis.model.batches import MissingResult

pytestmark = pytest.mark.anyio

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def line(custom_id: str) -> bytes:
    answer: dict[str, object] = {"id": f"b_{custom_id}", "custom_id": custom_id, "error": None}
    answer["response"] = {"status_code": 200, "request_id": "r", "body": CHAT}
    return json.dumps(answer).encode()


def openai_batches(results: bytes) -> Batches:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/batches/batch_1":
            status = {"id": "batch_1", "status": "completed", "output_file_id": "file_out"}
            return httpx.Response(200, json=status)
        assert request.url.path == "/v1/files/file_out/content"
        return httpx.Response(200, content=results)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return Batches(build_adapter("openai", api_key="k", http_client=client))


async def test_a_line_cut_short_is_its_items_error_the_others_kept() -> None:
    cut = line("item-2")[:60]
    results = await openai_batches(b"\n".join([line("item-0"), line("item-1"), cut])).results(
        "batch_1"
    )
    assert set(results.succeeded) == {"item-0", "item-1"}
    failed = results.failed["item-2"]
    assert failed.outcome == "errored" and isinstance(failed.error, ProtocolError)
    assert "line 3" in str(failed.error) and "not JSON" in str(failed.error)
    assert failed.error.provider == "openai"


async def test_a_line_of_a_shape_the_api_does_not_have_is_its_items_error() -> None:
    odd = json.dumps({"custom_id": "item-1", "response": "yes"}).encode()
    results = await openai_batches(line("item-0") + b"\n" + odd).results("batch_1")
    assert set(results.succeeded) == {"item-0"}
    assert isinstance(results.failed["item-1"].error, ProtocolError)


async def test_a_line_naming_no_item_fails_the_results_keeping_what_was_read() -> None:
    raw = b"\n".join([line("item-0"), b"\x7b\x22id\x22: 3, garbage", line("item-1")])
    with pytest.raises(ProtocolError, match=r"line 2") as caught:
        await openai_batches(raw).results("batch_1")
    partial = caught.value.partial_results  # type: ignore[attr-defined]
    assert set(partial.succeeded) == {"item-0", "item-1"}


async def test_an_id_the_results_name_twice_is_its_items_error_keeping_both() -> None:
    """The last of the two lines won without a word, though submit takes each id once."""
    failed = json.dumps({"custom_id": "item-1", "error": {"code": "x", "message": "no"}})
    raw = b"\n".join([line("item-0"), line("item-1"), failed.encode(), line("item-2")])
    results = await openai_batches(raw).results("batch_1")
    assert set(results.succeeded) == {"item-0", "item-2"}
    item = results.failed["item-1"]
    assert item.outcome == "errored" and isinstance(item.error, DuplicateResult)
    assert isinstance(item.error, ProtocolError) and item.error.provider == "openai"
    said = str(item.error)
    assert "'item-1'" in said and "2 results" in said and "succeeded, errored" in said
    assert [kept.outcome for kept in item.error.items] == ["succeeded", "errored"]
    assert item.error.items[0].response is not None and item.error.items[0].response.text == "Hi"


def running_batches(seen: list[str]) -> Batches:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json={"id": "batch_1", "status": "in_progress"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return Batches(build_adapter("openai", api_key="k", http_client=client))


async def test_a_wait_past_its_timeout_names_the_batch_and_where_it_stood() -> None:
    seen: list[str] = []
    with pytest.raises(BatchWaitTimeout) as caught:
        await running_batches(seen).wait("batch_1", poll_seconds=60, timeout_seconds=0.05)
    error = caught.value
    assert isinstance(error, TimeoutError) and isinstance(error, AdapterError)
    assert "batch_1" in str(error) and "in_progress" in str(error)
    assert error.status is not None and error.status.state == "running"
    assert not error.retryable and seen == ["/v1/batches/batch_1"]


@pytest.mark.parametrize(
    "options",
    [
        {"poll_seconds": -1},
        {"poll_seconds": "30"},
        {"poll_seconds": float("nan")},
        {"poll_seconds": True},
        {"timeout_seconds": -1},
        {"poll_seconds": float("inf")},
        {"timeout_seconds": float("nan")},
        {"timeout_seconds": "5"},
    ],
)
async def test_a_wait_given_seconds_that_are_not_is_refused_before_asking(
    options: dict[str, object],
) -> None:
    seen: list[str] = []
    name = next(iter(options))
    with pytest.raises(InvalidRequestError, match=name):
        await running_batches(seen).wait("batch_1", **options)  # type: ignore[arg-type]
    assert seen == []


def gemini_batches(done: dict[str, object]) -> Batches:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"name": "batches/b1", "done": True, **done})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return Batches(build_adapter("gemini", api_key="k", http_client=client))


GEMINI_OK = {
    "response": {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}]},
    "metadata": {"key": "k1"},
}


async def test_a_gemini_inlined_response_of_the_wrong_shape_is_its_items_error() -> None:
    odd = {"error": "no", "metadata": {"key": "k2"}}
    inlined = {"inlinedResponses": {"inlinedResponses": [GEMINI_OK, odd, {"metadata": 7}]}}
    with pytest.raises(ProtocolError, match=r"inlinedResponses\[2\]") as caught:
        await gemini_batches({"response": inlined}).results("b1")
    partial = caught.value.partial_results  # type: ignore[attr-defined]
    assert set(partial.succeeded) == {"k1"}
    assert isinstance(partial.failed["k2"].error, ProtocolError)


async def test_gemini_results_in_a_file_are_said_not_read_as_none() -> None:
    with pytest.raises(CapabilityError, match="files/batch-out"):
        await gemini_batches({"response": {"responsesFile": "files/batch-out"}}).results("b1")


async def test_an_id_the_results_left_out_says_so_when_looked_up() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/batches/batch_1":
            counts = {"total": 3, "completed": 3, "failed": 0}
            status = {"id": "batch_1", "status": "completed", "output_file_id": "file_out"}
            return httpx.Response(200, json={**status, "request_counts": counts})
        return httpx.Response(200, content=line("item-0") + b"\n" + line("item-1"))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    results = await Batches(build_adapter("openai", api_key="k", http_client=client)).results(
        "batch_1"
    )
    with pytest.raises(MissingResult, match=r"2 of the 3 requests.*left 1 out") as caught:
        results["item-2"]
    assert isinstance(caught.value, KeyError) and caught.value.provider == "openai"
    assert results["item-0"].outcome == "succeeded"


def polled(*answers: httpx.Response) -> tuple[Batches, list[str]]:
    """Batches whose status polls are answered in turn by ``answers`` (then completed)."""
    queue, seen = list(answers), []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if queue:
            return queue.pop(0)
        return httpx.Response(200, json={"id": "batch_1", "status": "completed"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return Batches(build_adapter("openai", api_key="k", http_client=client)), seen


RUNNING = {"id": "batch_1", "status": "in_progress"}
UPSTREAM = {"error": {"message": "upstream connect error", "type": "server_error"}}


async def test_a_poll_that_fails_retryably_is_asked_again_at_the_next_poll() -> None:
    """A 503 or a 429 in one poll of a wait that may last hours ended the wait."""
    batches, seen = polled(
        httpx.Response(200, json=RUNNING),
        httpx.Response(503, json=UPSTREAM),
        httpx.Response(429, json={"error": {"message": "slow down", "type": "rate_limit"}}),
        httpx.Response(200, json=RUNNING),
        httpx.Response(502, text="bad gateway"),
    )
    with anyio.fail_after(30):
        status = await batches.wait("batch_1", poll_seconds=0)
    assert status.state == "completed" and len(seen) == 6


async def test_polls_failing_past_max_retries_in_a_row_or_not_retryably_raise() -> None:
    batches, seen = polled(*(httpx.Response(503, json=UPSTREAM) for _ in range(3)))
    with anyio.fail_after(30), pytest.raises(ServerError, match="upstream connect error"):
        await batches.wait("batch_1", poll_seconds=0)  # max_retries 2: the third is raised
    assert len(seen) == 3
    refused = {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}
    batches, seen = polled(httpx.Response(401, json=refused))
    with anyio.fail_after(30), pytest.raises(AuthError):
        await batches.wait("batch_1", poll_seconds=0)
    assert len(seen) == 1


async def test_a_results_file_gone_raises_its_error_keeping_the_other_files_items() -> None:
    """The error file deleted (a Files API 404) failed ``results`` with every item of the
    output file, fetched and read, dropped: no call could reach them any more."""
    failed = json.dumps({"custom_id": "item-9", "error": {"code": "x", "message": "no"}}).encode()
    gone = {"error": {"message": "No such File object: file_err", "type": "invalid_request_error"}}
    error_file = [httpx.Response(404, json=gone), httpx.Response(200, content=failed)]

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/batches/batch_1":
            status = {"id": "batch_1", "status": "completed", "output_file_id": "file_out"}
            return httpx.Response(200, json={**status, "error_file_id": "file_err"})
        if path == "/v1/files/file_out/content":
            return httpx.Response(200, content=line("item-0") + b"\n" + line("item-1"))
        return error_file.pop(0)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    batches = Batches(build_adapter("openai", api_key="k", http_client=client))
    with pytest.raises(InvalidRequestError, match="No such File object") as caught:
        await batches.results("batch_1")
    partial = caught.value.partial_results
    assert partial is not None and set(partial.succeeded) == {"item-0", "item-1"}
    assert set((await batches.results("batch_1")).items) == {"item-0", "item-1", "item-9"}


async def test_a_batch_not_created_from_its_upload_names_the_uploaded_file() -> None:
    """A create refused (OpenAI's 429 when the queue's token limit is reached) left the
    uploaded requests' file on the provider with no word of it: its id, answered, was lost."""
    from metis.errors import RateLimitError
    from metis.model import CanonicalRequest, Message

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/files":
            return httpx.Response(200, json={"id": "file-up1", "object": "file"})
        full = {"message": "Enqueued token limit reached", "type": "rate_limit_exceeded"}
        return httpx.Response(429, json={"error": full})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    batches = Batches(build_adapter("openai", api_key="k", http_client=client))
    ask = CanonicalRequest(model="gpt-4o", messages=[Message.user("hi")], max_output_tokens=9)
    with pytest.raises(RateLimitError, match="Enqueued token limit") as caught:
        await batches.submit({"a": ask})
    assert any("uploaded as file file-up1" in note for note in caught.value.__notes__)


async def test_why_a_batch_failed_is_on_its_status() -> None:
    """An OpenAI batch whose input did not validate, a Gemini batch operation that failed:
    the provider's reasons were dropped, the status saying only 'failed'."""
    invalid = [
        {"code": "model_not_found", "message": "The model 'gpt-x' does not exist.", "line": 3},
        {"code": "invalid_json", "message": "\ud800", "line": None},
    ]
    answer = {"id": "batch_1", "status": "failed", "errors": {"object": "list", "data": invalid}}

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(answer).encode())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    status = await Batches(build_adapter("openai", api_key="k", http_client=client)).status("b")
    assert status.state == "failed" and status.errors == (
        "line 3: model_not_found: The model 'gpt-x' does not exist.",
        "invalid_json: \ufffd",
    )
    operation = {
        "name": "batches/b1",
        "done": True,
        "metadata": {"state": "BATCH_STATE_FAILED"},
        "error": {"code": 3, "message": "Request payload size exceeds the limit"},
    }
    failed = await gemini_batches(operation).status("b1")
    assert failed.state == "failed" and failed.errors == ("Request payload size exceeds the limit",)


async def test_anthropic_results_are_read_from_the_adapters_base_url_not_the_answers() -> None:
    """The results were fetched from the results_url the status named, with the adapter's key:
    an answer naming another host was sent the key, and a proxy's base URL was bypassed."""
    seen: list[str] = []
    ended = {
        "id": "msgbatch_1",
        "processing_status": "ended",
        "request_counts": {"succeeded": 1},
        "results_url": "https://elsewhere.example/v1/messages/batches/msgbatch_1/results",
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    result = {"custom_id": "a", "result": {"type": "succeeded", "message": message}}

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.host}{request.url.path}")
        if request.url.path.endswith("/results"):
            return httpx.Response(200, content=json.dumps(result).encode())
        return httpx.Response(200, json=ended)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    adapter = build_adapter(
        "anthropic", api_key="k", base_url="https://proxy.example/anthropic", http_client=client
    )
    results = await Batches(adapter).results("msgbatch_1")
    assert set(results.succeeded) == {"a"}
    assert seen[-1] == "proxy.example/anthropic/v1/messages/batches/msgbatch_1/results"
    assert not any(s.startswith("elsewhere") for s in seen)
