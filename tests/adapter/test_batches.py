"""Provider batches on the emulator: 100 requests through Anthropic Message Batches, OpenAI
Batch (Chat Completions and Responses), Azure OpenAI global batch and Gemini batch mode,
failed and expired items, a batch read back from its id alone in a new process, cost at the
batch rate; the batch wires against documented samples."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import anyio
import pytest

import metis
from metis import CanonicalRequest, Message, build_adapter
from metis.adapter.batches import Batches
from metis.core.options import UnknownOptionError
from metis.errors import CapabilityError, InvalidRequestError, ProtocolError, ServerError
from metis.testing.emulator import Emulator
from metis.wire.batches import RawItem
from metis.wire.batches import anthropic as anthropic_wire
from metis.wire.batches import gemini as gemini_wire
from metis.wire.batches import openai as openai_wire

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]
STACKS = [
    ("anthropic", "anthropic:claude-sonnet-4-5"),
    ("openai", "openai:gpt-4o"),
    ("openai_responses", "openai_responses:gpt-4o"),
    ("azure", "azure:gpt-4o-batch"),  # a global batch deployment's name
    ("gemini", "gemini:gemini-2.5-flash"),
]


def requests(
    model: str, count: int, marked: dict[int, str] | None = None
) -> dict[str, CanonicalRequest]:
    marks = marked or {}
    return {
        f"item-{i}": CanonicalRequest(
            model=model,
            messages=[Message.user(f"question {i}{marks.get(i, '')}")],
            max_output_tokens=64,
        )
        for i in range(count)
    }


def batches(stack: str, emulator: Emulator) -> Batches:
    mounted = {"base_url": emulator.base_url(stack)} if stack == "azure" else {}
    return Batches(build_adapter(stack, api_key="k", http_client=emulator.client(), **mounted))


@pytest.mark.backend_independent
@pytest.mark.parametrize(("stack", "model"), STACKS)
async def test_forty_requests_with_failed_items_read_back_by_id(stack: str, model: str) -> None:
    """Forty items (one and two digit ids, whose text order is not their number's) read back
    by id as well as a hundred did: each item costs the emulator and the reader alike."""
    emulator = Emulator()
    submitted = await batches(stack, emulator).submit(
        requests(model, 40, {7: " [fail]", 22: " [fail]"})
    )
    assert not submitted.done
    resumed = batches(stack, emulator)  # a new adapter: only the id is carried over
    with pytest.raises(InvalidRequestError, match="not ready"):
        await resumed.results(submitted.id)
    status = await resumed.wait(submitted.id, poll_seconds=0)
    assert status.state == "completed" and status.done
    results = await resumed.results(submitted.id)
    assert len(results) == 40
    assert set(results.failed) == {"item-7", "item-22"}
    for key in ("item-7", "item-22"):
        item = results[key]
        assert item.outcome == "errored" and isinstance(item.error, ServerError)
        assert item.error.provider_status == 500  # Anthropic's api_error too: no line says 400
    for i in (0, 20, 39):
        response = results.succeeded[f"item-{i}"]
        assert response.text == f"You said: question {i}"
        assert response.usage.input_tokens > 0
        assert response.provider == stack
    assert emulator.stats.requests >= 5  # submit (OpenAI: upload, create), polls, results


@pytest.mark.backend_independent
async def test_what_submit_left_out_of_an_item_is_listed_by_its_id() -> None:
    """A setting an item's model does not take is left out as in a single call, and said on
    the status ``submit`` returns, by the item's id (the results, read later, cannot)."""
    emulator = Emulator()
    items = requests("openai:gpt-5.1", 2)
    items["item-1"] = items["item-1"].model_copy(
        update={"temperature": 0.3, "thinking": metis.ThinkingConfig(effort="high")}
    )
    submitted = await batches("openai", emulator).submit(items)
    assert list(submitted.warnings) == ["item-1"]
    [dropped] = submitted.warnings["item-1"]
    assert (dropped.block_type, dropped.provider) == ("temperature", "openai")
    assert (await batches("openai", emulator).status(submitted.id)).warnings == {}


@pytest.mark.backend_independent
async def test_a_drop_every_item_makes_is_logged_once_for_the_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cited = metis.DocumentBlock.from_bytes(b"%PDF-1.4\n", "application/pdf", citations=True)
    items = {
        f"doc-{i}": CanonicalRequest(
            model="openai:gpt-4o", messages=[Message.user("Index it.", cited)], max_output_tokens=64
        )
        for i in range(3)
    }
    submitted = await batches("openai", Emulator()).submit(items)
    assert sorted(submitted.warnings) == ["doc-0", "doc-1", "doc-2"]  # each item says it
    logged = [r for r in caplog.records if r.name == "metis" and "document.citations" in r.message]
    assert len(logged) == 1  # not one line an item: a batch may hold thousands


@pytest.mark.parametrize(("stack", "model"), STACKS)
async def test_a_batch_that_expires(stack: str, model: str) -> None:
    emulator = Emulator()
    submitted = await batches(stack, emulator).submit(requests(model, 3, {1: " [expire]"}))
    status = await batches(stack, emulator).wait(submitted.id, poll_seconds=0)
    assert status.done
    results = await batches(stack, emulator).results(submitted.id)
    assert results.succeeded == {}
    if stack == "gemini":
        assert status.state == "expired" and len(results) == 0
    else:
        assert status.state in ("expired", "completed")  # Anthropic ends, its items expire
        assert {item.outcome for item in results.items.values()} == {"expired"}


async def test_a_cancelled_batch_cancels_its_items() -> None:
    emulator = Emulator()
    b = batches("anthropic", emulator)
    submitted = await b.submit(requests("anthropic:claude-sonnet-4-5", 2))
    status = await b.cancel(submitted.id)
    assert status.done
    results = await b.results(submitted.id)
    assert {item.outcome for item in results.items.values()} == {"cancelled"}


@pytest.mark.backend_independent
async def test_bad_batches_are_refused_before_sending() -> None:
    emulator = Emulator()
    b = batches("gemini", emulator)
    with pytest.raises(InvalidRequestError, match="at least one"):
        await b.submit({})
    mixed = {
        **requests("gemini:gemini-2.5-flash", 1),
        "other": requests("gemini:gemini-2.5-pro", 1)["item-0"],
    }
    with pytest.raises(InvalidRequestError, match="one model"):
        await b.submit(mixed)
    with pytest.raises(InvalidRequestError, match="distinct"):
        await batches("openai", emulator).submit([("a", mixed["other"]), ("a", mixed["other"])])
    openai = batches("openai", emulator)
    with pytest.raises(InvalidRequestError, match="a model of gemini, and this adapter speaks"):
        await openai.submit({"a": mixed["other"]})  # an OpenAI batch of a Gemini model
    with pytest.raises(InvalidRequestError, match=r"a batch is your ids .* got an item"):
        await openai.submit([mixed["other"]])  # type: ignore[list-item]
    with pytest.raises(InvalidRequestError, match="expected a CanonicalRequest"):
        await openai.submit({"a": "Hi"})  # type: ignore[dict-item]
    with pytest.raises(UnknownOptionError, match="did you mean 'poll_seconds'"):
        await openai.wait("batch_1", poll_second=0)  # type: ignore[call-arg]
    assert emulator.stats.requests == 0
    for stack in ("ollama", "bedrock", "vertex", "groq", "azure_responses", "bedrock_mantle"):
        with pytest.raises(CapabilityError):
            Batches(build_adapter(stack, api_key="k", settings=_settings(stack)))


def test_an_embedder_given_to_batches_is_told_apart_with_its_own_stack() -> None:
    embedder = metis.build_embedder("openai", api_key="k")
    with pytest.raises(metis.ConfigError) as refused:
        Batches(embedder)  # type: ignore[arg-type]
    assert "metis.build_adapter('openai')" in str(refused.value)
    assert "an embedder's requests are not chat requests" in str(refused.value)
    with pytest.raises(metis.ConfigError, match=r"build_adapter\('gemini'\)"):
        metis.CachedContents(embedder)  # type: ignore[arg-type]  # Gemini's only
    with pytest.raises(metis.ConfigError, match=r"build_adapter\('anthropic'\)"):
        Batches(object())  # type: ignore[arg-type]


def _settings(stack: str) -> dict[str, str]:
    found = {
        "bedrock": {"region": "us-east-1"},
        "bedrock_mantle": {"region": "us-east-1"},
        "vertex": {"project": "p", "location": "l"},
        "azure_responses": {"resource": "r"},
    }
    return found.get(stack, {})


@pytest.mark.backend_independent
async def test_azure_batches_live_under_openai_v1_with_chat_completions_items() -> None:
    emulator = Emulator()
    b = batches("azure", emulator)
    submitted = await b.submit(requests("azure:gpt-4o-batch", 2))
    await b.cancel(submitted.id)
    await b.results(submitted.id)
    upload, create, *rest = emulator.requests
    paths = [(r.method, r.path) for r in (upload, create, *rest)]
    batch = f"/azure/openai/v1/batches/{submitted.id}"
    assert paths[:4] == [
        ("POST", "/azure/openai/v1/files"),
        ("POST", "/azure/openai/v1/batches"),
        ("POST", f"{batch}/cancel"),
        ("GET", batch),
    ]
    assert all(path.startswith("/azure/openai/v1/") for _, path in paths)
    assert upload.headers["api-key"] == "k"
    lines = [json.loads(line) for line in upload.body.split(b"\r\n\r\n", 2)[2].splitlines()[:2]]
    assert [(line["url"], line["body"]["model"]) for line in lines] == [
        ("/chat/completions", "gpt-4o-batch")
    ] * 2
    assert create.json()["endpoint"] == "/chat/completions"


@pytest.mark.backend_independent
async def test_a_batch_api_needs_a_v1_root() -> None:
    adapter = build_adapter("openai", api_key="k")
    adapter.endpoint = dataclasses.replace(adapter.endpoint, path="/chat/completions")
    with pytest.raises(CapabilityError, match="not under a /v1/ API root"):
        Batches(adapter)


@pytest.mark.backend_independent
async def test_an_unknown_batch_id_is_the_providers_not_found() -> None:
    with pytest.raises(metis.InvalidRequestError):
        await batches("openai", Emulator()).status("batch_nope")


@pytest.mark.slow  # a whole process; the default run reads back by id in this one, above
@pytest.mark.backend_independent
def test_a_batch_is_read_back_from_its_id_in_a_new_process() -> None:
    with Emulator() as emulator:

        async def submit_all() -> dict[str, tuple[str, str]]:
            ids = {}
            for stack, model in STACKS:
                if stack not in ("anthropic", "openai", "gemini"):
                    continue
                base = emulator.base_url(stack)
                async with build_adapter(stack, api_key="k", base_url=base) as adapter:
                    status = await Batches(adapter).submit(requests(model, 4, {2: " [fail]"}))
                ids[stack] = (status.id, base)
            return ids

        ids = anyio.run(submit_all)
        script = f"""
import anyio, json
from metis import build_adapter
from metis.adapter.batches import Batches
from metis.core.options import UnknownOptionError

async def main():
    out = {{}}
    for stack, (batch_id, base) in {ids!r}.items():
        async with build_adapter(stack, api_key="k", base_url=base) as adapter:
            b = Batches(adapter)
            await b.wait(batch_id, poll_seconds=0)
            results = await b.results(batch_id)
        out[stack] = {{
            k: (v.outcome, v.response.text if v.response else type(v.error).__name__)
            for k, v in results.items.items()
        }}
    print(json.dumps(out))

anyio.run(main)
"""
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    for stack in ("anthropic", "openai", "gemini"):
        assert found[stack]["item-0"] == ["succeeded", "You said: question 0"]
        assert found[stack]["item-2"] == ["errored", "ServerError"]


@pytest.mark.backend_independent
def test_cost_at_the_batch_price() -> None:
    usage = metis.TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    standard = metis.cost_of("anthropic:claude-sonnet-4-5", usage)
    batch = metis.cost_of("anthropic:claude-sonnet-4-5", usage, batch=True)
    assert batch.usd == standard.usd / 2 and batch.pricing_version.endswith("+batch")
    tokens = metis.TokenUsage(input_tokens=1_000_000)
    assert metis.cost_of("voyage:voyage-3.5", tokens, batch=True).usd == Decimal("0.04")


# The wires against documented samples --------------------------------------------------


@pytest.mark.backend_independent
def test_anthropic_results_jsonl_as_documented() -> None:
    # docs.anthropic.com/en/api/retrieving-message-batch-results (each line's shape)
    raw = (
        b'{"custom_id":"my-second-request","result":{"type":"succeeded","message":{"id":"msg_1",'
        b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text",'
        b'"text":"Hello again!"}],"stop_reason":"end_turn","stop_sequence":null,"usage":'
        b'{"input_tokens":11,"output_tokens":36}}}}\n'
        b'{"custom_id":"my-first-request","result":{"type":"errored","error":{"type":"error",'
        b'"error":{"type":"invalid_request_error","message":"bad"}}}}\n'
        b'{"custom_id":"x","result":{"type":"expired"}}\n'
    )
    items = anthropic_wire.read_results(raw)
    assert [(i.custom_id, i.outcome) for i in items] == [
        ("my-second-request", "succeeded"),
        ("my-first-request", "errored"),
        ("x", "expired"),
    ]
    assert [i.status for i in items[1:]] == [400, 400]  # invalid_request_error; none given
    overloaded = b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'
    line = b'{"custom_id":"o","result":{"type":"errored","error":' + overloaded + b"}}\n"
    assert anthropic_wire.read_results(line)[0].status == 529
    status = anthropic_wire.read_status(
        {
            "id": "msgbatch_1",
            "processing_status": "ended",
            "request_counts": {
                "processing": 0,
                "succeeded": 2,
                "errored": 1,
                "canceled": 0,
                "expired": 0,
            },
            "results_url": "https://api.anthropic.com/v1/messages/batches/msgbatch_1/results",
        },
        "anthropic",
    )
    assert (status.state, status.total, status.succeeded, status.failed) == ("completed", 3, 2, 1)


@pytest.mark.backend_independent
def test_openai_output_lines_and_states() -> None:
    # platform.openai.com/docs/guides/batch (output file lines)
    raw = (
        b'{"id":"batch_req_1","custom_id":"request-2","response":{"status_code":200,'
        b'"request_id":"req_1","body":{"id":"chatcmpl-1","object":"chat.completion"}},"error":null}\n'
        b'{"id":"batch_req_2","custom_id":"request-1","response":{"status_code":400,'
        b'"request_id":"req_2","body":{"error":{"message":"bad","type":"invalid_request_error"}}},'
        b'"error":null}\n'
        b'{"id":"batch_req_3","custom_id":"request-3","response":null,"error":{"code":"batch_expired",'
        b'"message":"This request could not be executed before the completion window expired."}}\n'
    )
    items = openai_wire.read_results(raw)
    assert [(i.custom_id, i.outcome, i.status) for i in items] == [
        ("request-2", "succeeded", 200),
        ("request-1", "errored", 400),
        ("request-3", "expired", 400),
    ]
    upload = openai_wire.upload(
        "https://api.openai.com", "/v1/chat/completions", [("a", {"model": "m"})]
    )
    assert upload.content is not None and b'"custom_id":"a"' in upload.content
    assert b'name="purpose"\r\n\r\nbatch' in upload.content
    with pytest.raises(ProtocolError, match="unknown batch status"):
        openai_wire.read_status({"id": "b", "status": "dreaming"}, "openai")


@pytest.mark.backend_independent
def test_gemini_operation_states_and_inlined_responses() -> None:
    running = {"name": "batches/abc", "metadata": {"state": "JOB_STATE_RUNNING"}}
    assert gemini_wire.read_status(running, "gemini").state == "running"
    done = {
        "name": "batches/abc",
        "done": True,
        "metadata": {"state": "BATCH_STATE_SUCCEEDED", "batchStats": {"requestCount": "2"}},
        "response": {
            "inlinedResponses": {
                "inlinedResponses": [
                    {"response": {"candidates": []}, "metadata": {"key": "k1"}},
                    {"error": {"code": 400, "message": "bad"}, "metadata": {"key": "k2"}},
                ]
            }
        },
    }
    status = gemini_wire.read_status(done, "gemini")
    assert (status.id, status.state, status.total) == ("abc", "completed", 2)
    items = gemini_wire.read_results(done)
    assert [(i.custom_id, i.outcome) for i in items] == [("k1", "succeeded"), ("k2", "errored")]
    (send,) = gemini_wire.submit("https://g", "gemini-2.5-flash", [("k", {"contents": []})])
    assert send.url == "https://g/v1beta/models/gemini-2.5-flash:batchGenerateContent"
    assert send.body["batch"]["input_config"]["requests"]["requests"][0]["metadata"] == {"key": "k"}


@pytest.mark.backend_independent
async def test_an_item_that_cannot_be_read_is_that_items_error_only() -> None:
    b = Batches(build_adapter("anthropic", api_key="k"))
    bad = b._item(RawItem("bad", "succeeded", {"type": "message", "content": "not a list"}))
    assert bad.outcome == "errored" and isinstance(bad.error, ProtocolError)
    good = b._item(
        RawItem(
            "good",
            "succeeded",
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Hi"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        )
    )
    assert good.response is not None and good.response.text == "Hi"
    assert good.response.model == "anthropic:claude-sonnet-4-5"


def test_a_status_with_warnings_is_still_hashable_and_equal_to_its_plain_form() -> None:
    plain = metis.BatchStatus(id="b", provider="openai", state="pending", raw="validating")
    warned = dataclasses.replace(plain, warnings={"a": []})
    assert warned == plain and hash(warned) == hash(plain)
