"""``POST /v1/embeddings`` through the official openai SDK, with emulator-backed embedding
models of three platforms behind the gateway: float and base64 vectors, one input and many,
``dimensions``; and what it refuses, in OpenAI's error shape: a key not allowed the model,
a chat model, a route, token arrays, a bad body."""

from __future__ import annotations

import base64
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.embedding_vectors import unit_vector
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
pytestmark = pytest.mark.anyio

EMBEDDING_MODELS = {
    # alias -> (adapter entry, model id, wire name, its vectors' default size)
    "small": ("openai", "openai:text-embedding-3-small", "text-embedding-3-small", 1536),
    "gemini-emb": ("gemini", "gemini:gemini-embedding-001", "gemini-embedding-001", 3072),
    "titan": (
        "bedrock",
        "bedrock:amazon.titan-embed-text-v2:0",
        "amazon.titan-embed-text-v2:0",
        1024,
    ),
    "nomic": ("ollama", "ollama:nomic-embed-text", "nomic-embed-text", 768),
}
OLLAMA = {"type": "ollama", "max_retries": 0, "settings": {"keep_alive": "5m"}}
"""An adapter whose chat settings its embedding stack has none of: left to the chat."""
TEXTS = ["the first text", "a second one", "and a third, longer than the others"]
NARROW_KEY = "narrow-key"


def _app(tracer_provider: Any = None, **gateway: Any) -> Any:
    models = {
        model: {"adapter": adapter, "aliases": [alias]}
        for alias, (adapter, model, _, _) in EMBEDDING_MODELS.items()
    }
    keys = [{"name": "narrow", "sha256": digest(NARROW_KEY), "models": ["small"]}]
    settings = {"keys": keys, **gateway}
    config = gateway_config(
        Emulator(), settings, tracer_provider, models=models, adapters={"ollama": OLLAMA}
    )
    return create_app(config)


@asynccontextmanager
async def _clients(
    app: Any, key: str = GATEWAY_KEY
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The openai SDK's client of ``app`` in process, and a plain client of it."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        sdk = openai.AsyncOpenAI(
            api_key=key, base_url="http://gw/v1", http_client=http, max_retries=0
        )
        yield sdk, http


@pytest.mark.parametrize("alias", list(EMBEDDING_MODELS))
async def test_the_sdk_embeds_one_text_and_many_as_floats_and_as_base64(alias: str) -> None:
    _, _, wire, size = EMBEDDING_MODELS[alias]
    async with _clients(_app()) as (sdk, _):
        one = await sdk.embeddings.create(model=alias, input="just one", encoding_format="float")
        many = await sdk.embeddings.create(model=alias, input=TEXTS)  # the SDK asks for base64
    assert one.object == "list" and one.model == alias and len(one.data) == 1
    assert one.data[0].object == "embedding" and one.data[0].index == 0
    assert one.data[0].embedding == pytest.approx(unit_vector(wire, "just one", size))
    assert one.usage.prompt_tokens == one.usage.total_tokens > 0
    assert [d.index for d in many.data] == [0, 1, 2]
    for datum, text in zip(many.data, TEXTS, strict=True):  # float32 on the wire
        assert datum.embedding == pytest.approx(unit_vector(wire, text, size), abs=1e-6)
    assert many.usage.prompt_tokens > one.usage.prompt_tokens


async def test_dimensions_and_the_base64_body_as_openai_writes_it() -> None:
    async with _clients(_app()) as (sdk, http):
        sized = await sdk.embeddings.create(model="small", input=TEXTS, dimensions=64)
        raw = await http.post(
            "/v1/embeddings",
            json={"model": "titan", "input": ["x y"], "encoding_format": "base64", "user": "u1"},
            headers={"authorization": f"Bearer {GATEWAY_KEY}"},
        )
    assert [len(d.embedding) for d in sized.data] == [64, 64, 64]
    assert raw.status_code == 200 and raw.headers["x-request-id"]
    encoded = raw.json()["data"][0]["embedding"]
    assert isinstance(encoded, str)
    floats = struct.unpack(f"<{1024}f", base64.b64decode(encoded))
    assert list(floats) == pytest.approx(unit_vector("amazon.titan-embed-text-v2:0", "x y", 1024))


async def test_a_key_may_embed_only_with_its_models() -> None:
    async with _clients(_app(), NARROW_KEY) as (sdk, _):
        assert len((await sdk.embeddings.create(model="small", input="ok")).data) == 1
        with pytest.raises(openai.PermissionDeniedError) as refused:
            await sdk.embeddings.create(model="gemini-emb", input="no")
        with pytest.raises(openai.NotFoundError) as unknown:  # as on the chat APIs
            await sdk.embeddings.create(model="nope", input="no")
    assert refused.value.status_code == 403
    assert refused.value.body["code"] == "model_not_allowed"
    assert unknown.value.body["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("model", "said"),
    [("gpt", "not an embedding model"), ("fallback", "is a route"), ("sonnet", "not an embed")],
)
async def test_a_model_that_cannot_embed_is_a_400_saying_so(model: str, said: str) -> None:
    async with _clients(_app()) as (sdk, _):
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.embeddings.create(model=model, input="hello")
    assert said in refused.value.body["message"]
    assert refused.value.body["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"model": "small", "input": [[1, 2, 3]]}, "token arrays"),
        ({"model": "small", "input": [1, 2, 3]}, "token arrays"),
        ({"model": "small", "input": []}, "non-empty list"),
        ({"model": "small", "input": ["a", None]}, "input[1]"),
        ({"model": "small"}, "input"),
        ({"input": "a"}, "model"),
        ({"model": "small", "input": "a", "encoding_format": "int8"}, "encoding_format"),
        ({"model": "small", "input": "a", "dimensions": 0}, "dimensions"),
        ({"model": "small", "input": "a", "user": 5}, "user"),
        ({"model": "small", "input": "a", "stream": True}, "unrecognized request argument"),
        ({"model": "small", "input": ["a"] * 2049}, "at most 2048"),
        ({"model": "small", "input": ""}, "empty"),
        ({"model": "titan", "input": "a", "dimensions": 5}, "dimensions"),
        ({"model": "nope", "input": "a"}, "not served here"),
        ([], "JSON object"),
    ],
)
async def test_a_bad_body_is_refused_in_openais_shape(body: Any, said: str) -> None:
    async with _clients(_app()) as (_, http):
        answer = await http.post(
            "/v1/embeddings", json=body, headers={"authorization": f"Bearer {GATEWAY_KEY}"}
        )
    assert answer.status_code == (404 if said == "not served here" else 400)
    error = answer.json()["error"]
    assert said in error["message"] and error["type"] == "invalid_request_error"
    assert set(error) == {"message", "type", "param", "code"}


async def test_no_key_is_a_401_and_a_get_a_405() -> None:
    async with _clients(_app()) as (_, http):
        body = {"model": "small", "input": "a"}
        unkeyed = await http.post("/v1/embeddings", json=body)
        got = await http.get("/v1/embeddings")
    assert unkeyed.status_code == 401 and unkeyed.json()["error"]["code"] == "invalid_api_key"
    assert got.status_code == 405 and "error" in got.json()


async def test_the_metrics_count_embeddings_their_tokens_cost_and_refusals() -> None:
    app = _app()
    async with _clients(app) as (sdk, http):
        await sdk.embeddings.create(model="small", input=TEXTS)
        await sdk.embeddings.create(model="gemini-emb", input="one")
        with pytest.raises(openai.BadRequestError):
            await sdk.embeddings.create(model="gpt", input="no")
        text = (await http.get("/metrics")).text
    assert (
        'metis_gateway_requests_total{api="embeddings",'
        'endpoint="POST /v1/embeddings",model="small",status="200"} 1'
    ) in text
    assert (
        'metis_gateway_requests_total{api="embeddings",'
        'endpoint="POST /v1/embeddings",model="gemini-emb",status="200"} 1'
    ) in text
    assert (
        'metis_gateway_requests_total{api="embeddings",'
        'endpoint="POST /v1/embeddings",model="",status="400"} 1'
    ) in text
    assert (
        'metis_gateway_errors_total{api="embeddings",'
        'endpoint="POST /v1/embeddings",error_class="capability"} 1'
    ) in text
    model = "openai:text-embedding-3-small"
    assert f'metis_gateway_tokens_total{{model="{model}",direction="input"}}' in text
    assert f'metis_gateway_cost_usd_total{{model="{model}"}}' in text


async def test_a_keys_budget_is_charged_for_embeddings() -> None:
    keys = [{"name": "paid", "sha256": digest("paid-key"), "budget_usd": "0.0000001"}]
    app = _app(keys=keys)
    async with _clients(app, "paid-key") as (sdk, _):
        await sdk.embeddings.create(model="small", input=TEXTS * 50)
        assert await app.state.gateway.keys.spent("paid") > 0
        with pytest.raises(openai.RateLimitError) as over:
            await sdk.embeddings.create(model="small", input="more")
    assert over.value.body["code"] == "insufficient_quota"


async def test_a_body_over_the_limit_is_a_413() -> None:
    async with _clients(_app(max_request_bytes=2048)) as (sdk, _):
        with pytest.raises(openai.APIStatusError) as refused:
            await sdk.embeddings.create(model="small", input=["x" * 100] * 40)
    assert refused.value.status_code == 413
    assert refused.value.body["code"] == "request_too_large"


async def test_a_server_span_with_the_embedders_client_span_under_it() -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    async with _clients(_app(provider, opentelemetry=True)) as (sdk, _):
        await sdk.embeddings.create(model="small", input=TEXTS)
    spans = exporter.get_finished_spans()
    (server,) = [s for s in spans if s.name == "POST /v1/embeddings"]
    assert server.attributes["http.response.status_code"] == 200
    under = [
        s for s in spans if s.parent is not None and s.parent.span_id == server.context.span_id
    ]
    assert under and all(s.context.trace_id == server.context.trace_id for s in under)
