"""Embeddings end to end: every embedding stack against the emulator, splitting and order
under concurrency, a failed request in the middle, every error class. What goes concurrently
runs under asyncio and trio; the wire formats and the errors read from them under asyncio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

import metis
from metis import (
    AuthError,
    CapabilityError,
    ContextOverflowError,
    InvalidRequestError,
    ListSink,
    OverloadedError,
    RateLimitError,
    ServerError,
)
from metis.adapter.embedder import Embedder, build_embedder
from metis.core.options import UnknownOptionError
from metis.errors import AdapterError
from metis.routing.limits import Limiter
from metis.routing.limits import Limits as RouteLimits
from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.embedding_vectors import unit_vector

pytestmark = pytest.mark.anyio

# stack, wire model, settings, call options
STACKS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("openai", "text-embedding-3-small", {}, {"dimensions": 8}),
    ("azure", "text-embedding-3-small", {"resource": "r"}, {"dimensions": 8}),
    ("mistral", "mistral-embed", {}, {}),
    ("voyage", "voyage-3.5", {}, {"input_type": "query", "dimensions": 256}),
    ("cohere", "embed-v4.0", {}, {"input_type": "document", "dimensions": 256}),
    ("gemini", "gemini-embedding-001", {}, {"input_type": "query", "dimensions": 128}),
    ("vertex", "gemini-embedding-001", {"project": "p", "location": "us-central1"}, {}),
    ("vertex", "text-embedding-005", {"project": "p", "location": "us-central1"}, {}),
    ("bedrock", "amazon.titan-embed-text-v2:0", {"region": "us-east-1"}, {"dimensions": 256}),
    ("bedrock", "cohere.embed-english-v3", {"region": "us-east-1"}, {"input_type": "query"}),
    ("ollama", "nomic-embed-text", {}, {}),
    ("openai_compatible", "bge-small-en", {}, {"dimensions": 8}),
]
TEXTS = ["the first text", "a second one", "and a third, longer than the others"]


def embedder(
    stack: str, emulator: Emulator, settings: dict[str, Any] | None = None, **config: Any
) -> Embedder:
    base_url = emulator.base_url("azure") if stack == "azure" else None
    config.setdefault("max_retries", 0)
    return build_embedder(
        stack,
        api_key="k",
        http_client=emulator.client(),
        base_url=base_url,
        settings=settings or {},
        **config,
    )


@pytest.mark.backend_independent
@pytest.mark.parametrize(("stack", "model", "settings", "options"), STACKS)
async def test_every_stack_embeds_in_input_order_on_the_emulator(
    stack: str, model: str, settings: dict[str, Any], options: dict[str, Any]
) -> None:
    emulator = Emulator(models="any" if stack == "openai_compatible" else "catalog")
    result = await embedder(stack, emulator, settings).embed(
        TEXTS, model=f"{stack}:{model}", **options
    )
    size = result.dimensions
    assert [unit_vector(model, text, size) for text in TEXTS] == result.vectors
    assert result.model == f"{stack}:{model}"
    assert result.usage.input_tokens > 0
    if "dimensions" in options:
        assert size == options["dimensions"]


async def test_a_thousand_texts_split_into_twenty_requests_run_concurrently_and_join_in_order(
    tmp_path: Path,
) -> None:
    stack = tmp_path / "small.yaml"
    stack.write_text("name: small\nextends: openai\nlimits: {max_inputs: 50, concurrency: 8}\n")
    emulator = Emulator(record=0)
    texts = [f"text number {i}" for i in range(1_000)]
    result = await build_embedder(stack, api_key="k", http_client=emulator.client()).embed(
        texts, model="text-embedding-3-small", dimensions=4
    )
    assert result.requests == 20 and emulator.stats.requests == 20
    assert result.vectors == [unit_vector("text-embedding-3-small", t, 4) for t in texts]
    assert result.usage.input_tokens == sum(max(1, (len(t) + 3) // 4) for t in texts)


async def test_a_stack_files_result_is_named_by_its_path_and_priced_by_its_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was ``small:text-embedding-3-small``, which cost_of knew nothing of: 0, with a 'no
    price' warning. A chat reply through a stack file is named by its path, and priced so."""
    (tmp_path / "small.yaml").write_text("name: small\nextends: openai\n")
    monkeypatch.chdir(tmp_path)
    emulator = Emulator()
    usage = metis.TokenUsage(input_tokens=1_000_000)
    for model in ("small.yaml:text-embedding-3-small", "text-embedding-3-small"):
        result = await embedder("small.yaml", emulator).embed(["a", "b"], model=model)
        assert result.model == "small.yaml:text-embedding-3-small"
        assert metis.cost_of(result.model, result.usage).priced
    assert (
        metis.cost_of("small.yaml:text-embedding-3-small", usage).usd
        == metis.cost_of("openai:text-embedding-3-small", usage).usd
    )
    builtin = await embedder("openai", emulator).embed(["a"], model="text-embedding-3-small")
    assert builtin.model == "openai:text-embedding-3-small"


async def test_a_provider_limit_splits_a_call_cohere_96_a_request() -> None:
    emulator = Emulator()
    texts = [f"t{i}" for i in range(200)]
    result = await embedder("cohere", emulator).embed(
        texts,
        model="cohere:embed-v4.0",
        dimensions=256,  # the smallest vectors: 200 are made
    )
    assert result.requests == 3
    assert sorted(len(body["texts"]) for body in emulator.bodies("cohere")) == [8, 96, 96]


async def test_the_token_limit_of_a_request_splits_too(tmp_path: Path) -> None:
    stack = tmp_path / "t.yaml"
    stack.write_text("name: t\nextends: openai\nlimits: {max_request_tokens: 100}\n")
    emulator = Emulator()
    texts = ["word " * 40] * 5  # about 50 tokens each: two a request
    result = await build_embedder(stack, api_key="k", http_client=emulator.client()).embed(
        texts, model="text-embedding-3-small", dimensions=4
    )
    assert sorted(len(b["input"]) for b in emulator.bodies("openai")) == [1, 2, 2]
    assert len(result) == 5


class FailingFor(httpx.AsyncBaseTransport):
    """The emulator, except that a request carrying ``marker`` gets ``status``."""

    def __init__(self, emulator: Emulator, marker: str, status: int, times: int = 1_000) -> None:
        self.inner, self.marker, self.status, self.times = (
            emulator.transport(),
            marker,
            status,
            times,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.marker.encode() in request.content and self.times > 0:
            self.times -= 1
            body = {"error": {"message": "refused on purpose", "type": "invalid_request_error"}}
            return httpx.Response(self.status, json=body, headers={"retry-after": "0"})
        return await self.inner.handle_async_request(request)


async def test_a_failed_request_in_the_middle_keeps_every_vector_that_arrived(
    tmp_path: Path,
) -> None:
    stack = tmp_path / "s.yaml"
    stack.write_text("name: s\nextends: openai\nlimits: {max_inputs: 10, concurrency: 3}\n")
    emulator = Emulator()
    client = httpx.AsyncClient(transport=FailingFor(emulator, "poison", 400))
    texts = [f"text {i}" for i in range(100)]
    texts[55] = "poison"
    with pytest.raises(InvalidRequestError) as caught:
        await build_embedder(stack, api_key="k", http_client=client).embed(
            texts, model="text-embedding-3-small", dimensions=4
        )
    partial = caught.value.partial_embeddings
    assert partial is not None
    assert partial.failed == list(range(50, 60))
    assert "items 50-59" in str(caught.value) and "refused on purpose" in str(caught.value)
    for i, vector in enumerate(partial.vectors):
        if i in range(50, 60):
            assert vector is None
        else:
            assert vector == unit_vector("text-embedding-3-small", texts[i], 4)
    assert partial.succeeded == 90


async def test_a_transient_failure_is_retried_and_the_call_succeeds() -> None:
    emulator = Emulator()
    client = httpx.AsyncClient(transport=FailingFor(emulator, "flaky", 429, times=1))
    sink = ListSink()
    e = build_embedder("openai", api_key="k", http_client=client, telemetry=sink, max_retries=2)
    result = await e.embed(["flaky", "fine"], model="openai:text-embedding-3-small", dimensions=4)
    assert len(result) == 2
    names = [event.name for event in sink.events]
    assert names == [
        "llm.call_started",
        "llm.call_failed",
        "llm.call_started",
        "llm.call_completed",
    ]
    assert sink.events[1].error_class == "rate_limit"  # type: ignore[attr-defined]


FAULTS = [
    ("rate_limit=0", RateLimitError),
    ("overloaded", OverloadedError),
    ("server_error", ServerError),
    ("auth", AuthError),
    ("context_overflow", ContextOverflowError),
]


@pytest.mark.backend_independent
@pytest.mark.parametrize(("fault", "error"), FAULTS)
@pytest.mark.parametrize(
    ("stack", "model", "settings", "options"),
    [
        s
        for s in STACKS
        if s[0] in ("openai", "azure", "cohere", "gemini", "vertex", "bedrock", "ollama")
    ],
)
async def test_every_error_class_from_each_providers_error_body(
    fault: str,
    error: type[AdapterError],
    stack: str,
    model: str,
    settings: dict[str, Any],
    options: dict[str, Any],
) -> None:
    emulator = Emulator()
    emulator.push_fault(fault, times=10)
    with pytest.raises(error) as caught:
        await embedder(stack, emulator, settings).embed(
            ["a text"], model=f"{stack}:{model}", **options
        )
    assert caught.value.partial_embeddings is not None
    assert caught.value.partial_embeddings.failed == [0]
    assert caught.value.provider == stack


@pytest.mark.backend_independent
async def test_an_unsupported_dimension_is_a_capability_error_before_sending() -> None:
    emulator = Emulator()
    e = embedder("bedrock", emulator, {"region": "us-east-1"})
    with pytest.raises(CapabilityError, match="256, 512, 1024"):
        await e.embed(["x"], model="bedrock:amazon.titan-embed-text-v2:0", dimensions=300)
    with pytest.raises(CapabilityError, match="gives only 1536 dimensions"):
        await embedder("openai", emulator).embed(
            ["x"], model="openai:text-embedding-ada-002", dimensions=512
        )
    assert emulator.stats.requests == 0


@pytest.mark.backend_independent
async def test_an_input_type_the_provider_does_not_have_is_a_capability_error() -> None:
    emulator = Emulator()
    with pytest.raises(CapabilityError, match="alike"):
        await embedder("openai", emulator).embed(
            ["x"], model="openai:text-embedding-3-small", input_type="clustering"
        )
    with pytest.raises(CapabilityError, match="query, document"):
        await embedder("voyage", emulator).embed(
            ["x"], model="voyage:voyage-3.5", input_type="clustering"
        )
    with pytest.raises(CapabilityError):
        await embedder("bedrock", emulator, {"region": "us-east-1"}).embed(
            ["x"], model="bedrock:amazon.titan-embed-text-v2:0", input_type="classification"
        )
    assert emulator.stats.requests == 0
    # query and document mean nothing to OpenAI: taken, and nothing is sent for them
    await embedder("openai", emulator).embed(
        ["x"], model="openai:text-embedding-3-small", input_type="query"
    )
    assert "input_type" not in emulator.bodies("openai")[0]


@pytest.mark.backend_independent
async def test_a_text_too_long_is_refused_unless_truncation_is_asked_for() -> None:
    emulator = Emulator()
    long = "word " * 4000  # about 5,000 tokens; embed-english-v3.0 takes 512
    with pytest.raises(ContextOverflowError, match="input 1 is about"):
        await embedder("cohere", emulator).embed(["ok", long], model="cohere:embed-english-v3.0")
    assert emulator.stats.requests == 0
    await embedder("cohere", emulator).embed(
        ["ok", long], model="cohere:embed-english-v3.0", truncate=True
    )
    assert emulator.bodies("cohere")[0]["truncate"] == "END"  # Cohere cuts it
    very_long = "word " * 40_000  # past text-embedding-3-small's 8,191: OpenAI has no switch
    await embedder("openai", emulator).embed(
        [very_long], model="openai:text-embedding-3-small", truncate=True
    )
    sent = emulator.bodies("openai")[0]["input"][0]
    assert len(sent) < len(very_long) and very_long.startswith(sent)


@pytest.mark.backend_independent
async def test_bad_inputs_are_classified_errors() -> None:
    e = embedder("openai", Emulator())
    with pytest.raises(InvalidRequestError, match="input 1 is empty"):
        await e.embed(["a", " "], model="openai:text-embedding-3-small")
    with pytest.raises(InvalidRequestError, match="input 0: expected a text"):
        await e.embed([3], model="openai:text-embedding-3-small")  # type: ignore[list-item]
    for not_a_list in (42, b"hi", {"text": "hi"}):
        with pytest.raises(InvalidRequestError, match="inputs: expected a text or a list"):
            await e.embed(not_a_list, model="openai:text-embedding-3-small")  # type: ignore[arg-type]
    kept = await e.embed((t for t in ["a", "b"]), model="openai:text-embedding-3-small")  # type: ignore[arg-type]
    assert len(kept.vectors) == 2  # any iterable of inputs, in its order
    with pytest.raises(CapabilityError, match="image"):
        await e.embed([metis.ImageInput("aGk=")], model="openai:text-embedding-3-small")
    assert (await e.embed([], model="openai:text-embedding-3-small")).vectors == []


@pytest.mark.backend_independent
async def test_images_go_to_a_model_that_embeds_them() -> None:
    emulator = Emulator()
    image = metis.ImageInput("iVBORw0KGgo=", "image/png")
    result = await embedder("cohere", emulator).embed(
        ["a caption", image], model="cohere:embed-v4.0"
    )
    assert len(result) == 2
    (body,) = emulator.bodies("cohere")
    assert body["inputs"][1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.backend_independent
async def test_a_missing_key_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(metis.NotConfiguredError, match="VOYAGE_API_KEY"):
        await build_embedder("voyage", http_client=Emulator().client()).embed(
            ["x"], model="voyage-3.5"
        )


async def test_aembed_one_liner_over_a_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    with Emulator() as emulator:
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("OPENAI_BASE_URL", emulator.base_url("openai"))
        result = await metis.aembed("openai:text-embedding-3-small", ["hi", "there"], dimensions=8)
        again = await metis.aembed("openai:text-embedding-3-small", "hi", dimensions=8)
    assert result.vectors[0] == again.vectors[0] == unit_vector("text-embedding-3-small", "hi", 8)
    with pytest.raises(UnknownOptionError, match="did you mean 'dimensions'"):
        await metis.aembed("openai:text-embedding-3-small", "hi", dimension=8)  # type: ignore[call-arg]


@pytest.mark.backend_independent
async def test_a_model_the_provider_does_not_have_notes_its_embedding_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Emulator() as emulator:
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("OPENAI_BASE_URL", emulator.base_url("openai"))
        for model, near in [
            ("openai:text-embeding-3-small", "text-embedding-3-small"),
            ("openai:gpt-4o", "text-embedding-3-small"),  # a chat model
        ]:
            with pytest.raises(InvalidRequestError) as caught:
                await metis.aembed(model, "hi")
            assert caught.value.provider_status == 404
            [note] = caught.value.__notes__
            assert "is not an embedding model metis knows at openai" in note
            assert near in note


@pytest.mark.backend_independent
def test_embed_one_liner_blocks_and_cost_of_prices_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with Emulator() as emulator:
        monkeypatch.setenv("VOYAGE_API_KEY", "k")
        result = metis.embed(
            "voyage:voyage-3.5", ["hi"], base_url=emulator.base_url("openai"), input_type="document"
        )
    assert json.loads(emulator.requests[0].body)["input_type"] == "document"
    cost = metis.cost_of(result.model, result.usage)
    assert (
        cost.priced
        and cost.usd
        == result.usage.input_tokens
        * metis.cost_of("voyage:voyage-3.5", metis.TokenUsage(input_tokens=1_000_000)).usd
        / 1_000_000
    )


async def test_a_configuration_an_auth_step_refuses_is_raised_as_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "not/a/project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    e = embedder("vertex", Emulator())
    with pytest.raises(metis.ConfigError, match="not a valid project"):
        await e.embed(["a", "b"], model="vertex:text-embedding-005", concurrency=2)


class Counting(httpx.AsyncBaseTransport):
    """The emulator, counting the requests in flight at once."""

    def __init__(self, emulator: Emulator) -> None:
        self.inner, self.now, self.most = emulator.transport(), 0, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            for _ in range(5):
                await anyio.lowlevel.checkpoint()  # let every request that may start, start
            return await self.inner.handle_async_request(request)
        finally:
            self.now -= 1


async def test_concurrency_is_bounded_by_the_call_and_by_a_routers_limiter(tmp_path: Path) -> None:
    stack = tmp_path / "c.yaml"
    stack.write_text("name: c\nextends: openai\nlimits: {max_inputs: 1}\n")
    texts = [f"t{i}" for i in range(12)]  # twice the call's concurrency
    counting = Counting(Emulator())
    client = httpx.AsyncClient(transport=counting)
    e = build_embedder(stack, api_key="k", http_client=client)
    await e.embed(texts, model="text-embedding-3-small", dimensions=4, concurrency=6)
    assert counting.most == 6
    counting.most = 0
    limiter = Limiter("c", RouteLimits(max_concurrent=2, tokens_per_minute=10**9))
    limited = build_embedder(stack, api_key="k", http_client=client, limiter=limiter)
    result = await limited.embed(texts, model="text-embedding-3-small", dimensions=4, concurrency=6)
    assert counting.most == 2 and len(result) == 12


async def test_a_limiter_that_refuses_fails_the_requests_it_refuses_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    stack = tmp_path / "r.yaml"
    stack.write_text("name: r\nextends: openai\nlimits: {max_inputs: 1, concurrency: 1}\n")
    limiter = Limiter("r", RouteLimits(requests_per_minute=2, on_limit="fail"))
    e = build_embedder(stack, api_key="k", http_client=Emulator().client(), limiter=limiter)
    with pytest.raises(RateLimitError) as caught:
        await e.embed(["a", "b", "c", "d"], model="text-embedding-3-small", dimensions=4)
    partial = caught.value.partial_embeddings
    assert partial is not None and partial.succeeded == 2 and len(partial.failed) == 2
    # which two: the order tasks start in is the event loop's (trio's differs from asyncio's)
    assert all((v is None) == (i in partial.failed) for i, v in enumerate(partial.vectors))


def test_an_image_input_is_base64_text_of_an_image_type() -> None:
    """Bytes went on to fail as 'a value JSON cannot hold'; a number or a PDF type was sent."""
    with pytest.raises(TypeError, match=r"not bytes: base64\.b64encode\(data\)\.decode\(\)"):
        metis.ImageInput(b"\x89PNG", "image/png")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not int"):
        metis.ImageInput(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="an image type, not 'application/pdf'"):
        metis.ImageInput("aGk=", "application/pdf")
    assert metis.ImageInput("aGk=").data_url == "data:image/png;base64,aGk="
