"""The adapter itself: the ProviderAdapter surface over a pipeline, mocked the way users
would mock it (respx patches httpx, so the adapter's own client is used)."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from metis import AdapterConfig, AdapterError, build_adapter
from metis.errors import AuthError, ConfigError, ErrorClass, StackError
from metis.model import CanonicalRequest, Message, MessageComplete, TextDelta
from metis.model.response import StopKind

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello!"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 9, "output_tokens": 3},
}


def request(**fields: object) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("Hi")],
        max_output_tokens=64,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
@respx.mock
async def test_complete_sends_auth_version_and_wire_model_and_folds_the_reply() -> None:
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(200, json=MESSAGE)
    )
    async with build_adapter("anthropic", AdapterConfig(api_key="sk-ant-test-key")) as adapter:
        response = await adapter.complete(request())
    sent = route.calls.last.request
    assert sent.headers["x-api-key"] == "sk-ant-test-key"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = json.loads(sent.content)
    assert body["model"] == "claude-sonnet-4-5" and body["stream"] is False
    assert response.text == "Hello!"
    assert response.stop_reason.kind is StopKind.END_TURN and response.stop_reason.raw == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (9, 3)
    assert response.provider == "anthropic" and response.model == "anthropic:claude-sonnet-4-5"
    assert response.message_id == "msg_1" and response.latency_ms >= 0


@pytest.mark.anyio
@respx.mock
async def test_stream_streams_unless_the_request_says_otherwise() -> None:
    events = [
        {
            "type": "message_start",
            "message": {"id": "m", "model": "x", "usage": {"input_tokens": 1, "output_tokens": 1}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
    )
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k"))
    received = [e async for e in adapter.stream(request())]
    assert json.loads(route.calls.last.request.content)["stream"] is True
    assert [e.text for e in received if isinstance(e, TextDelta)] == ["Hi"]
    folded = await adapter.complete(request(stream=True))  # complete() honours it too
    assert json.loads(route.calls.last.request.content)["stream"] is True
    assert folded.text == "Hi"
    await adapter.aclose()


@pytest.mark.anyio
@respx.mock
async def test_stream_of_a_whole_body_call_yields_the_same_events() -> None:
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(200, json=MESSAGE)
    )
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k"))
    received = [e async for e in adapter.stream(request(stream=False))]
    assert json.loads(route.calls.last.request.content)["stream"] is False
    assert type(received[0]).__name__ == "MessageStart"
    assert isinstance(received[-1], MessageComplete)
    await adapter.aclose()


@pytest.mark.anyio
@respx.mock
async def test_base_url_and_extra_headers_from_config() -> None:
    route = respx.post("https://proxy.example.com/v1/messages").mock(
        return_value=httpx.Response(200, json=MESSAGE)
    )
    config = AdapterConfig(
        api_key="k", base_url="https://proxy.example.com", extra_headers={"x-team": "metis"}
    )
    async with build_adapter("anthropic", config) as adapter:
        await adapter.complete(request())
    assert route.calls.last.request.headers["x-team"] == "metis"


@pytest.mark.anyio
@respx.mock
async def test_the_key_comes_from_the_stacks_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0123456789")
    route = respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=httpx.Response(
            200,
            json={
                "id": "c",
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "ok"},
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1},
            },
        )
    )
    async with build_adapter("openai") as adapter:
        response = await adapter.complete(
            CanonicalRequest(
                model="openai:gpt-4o", messages=[Message.user("hi")], max_output_tokens=5
            )
        )
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-from-env-0123456789"
    assert response.text == "ok"


@pytest.mark.anyio
@respx.mock
async def test_complete_keeps_what_arrived_when_it_fails() -> None:
    respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(
            200,
            text="event: message_start\ndata: "
            + json.dumps(
                {
                    "type": "message_start",
                    "message": {
                        "id": "m",
                        "model": "x",
                        "usage": {"input_tokens": 1, "output_tokens": 0},
                    },
                }
            )
            + "\n\nevent: content_block_start\ndata: "
            + json.dumps(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": "so far"},
                }
            )
            + "\n\n",
            headers={"content-type": "text/event-stream"},
        )
    )
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k", max_retries=0))
    # A non-streamed call answered with a cut-off stream: classified, and nothing lost.
    with pytest.raises(AdapterError) as caught:
        async for _ in adapter.stream(request()):
            pass
    assert "ended" in str(caught.value)
    await adapter.aclose()


def test_capabilities_can_be_overridden_per_adapter() -> None:
    adapter = build_adapter("anthropic", AdapterConfig(capabilities={"supports_images": False}))
    assert adapter.capabilities.supports_images is False
    assert adapter.capabilities.supports_tools is True


def test_an_unknown_stack_lists_the_built_in_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"no built-in stack named 'anthropik'.*anthropic, .*openai"
    ):
        build_adapter("anthropik")


def test_a_stack_file_with_a_broken_stage_list_names_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stack = tmp_path / "mine.yaml"
    stack.write_text(
        "name: mine\nendpoint: {base_url: 'http://x', path: /v1}\n"
        "stages: [invariants, {encode: {codec: anthropic}}, normalize, transport]\n"
    )
    with pytest.raises(
        StackError, match=r"mine.yaml: stages\[2\]: stage 'normalize': option 'codec'"
    ):
        build_adapter(stack)


def test_wire_model_strips_only_the_adapters_own_prefix() -> None:
    adapter = build_adapter("anthropic")
    assert adapter.wire_model("anthropic:claude-x") == "claude-x"
    assert adapter.wire_model("claude-x") == "claude-x"
    assert adapter.wire_model("llama3:8b") == "llama3:8b"


@pytest.mark.anyio
async def test_message_complete_is_the_last_event_of_every_stream() -> None:
    # covered end to end elsewhere; here: the adapter adds nothing after it
    with respx.mock:
        respx.post("https://api.anthropic.com/v1/messages").mock(
            return_value=httpx.Response(200, json=MESSAGE)
        )
        adapter = build_adapter(
            "anthropic", AdapterConfig(api_key="k", capabilities={"supports_streaming": False})
        )
        events = [e async for e in adapter.stream(request())]
        await adapter.aclose()
    assert isinstance(events[-1], MessageComplete)
    assert [e.type for e in events] == ["message.start", "text.delta", "message.complete"]


@pytest.mark.anyio
async def test_asking_a_provider_that_cannot_stream_to_stream_is_refused_before_sending() -> None:
    sent: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(500))
    )
    config = AdapterConfig(
        api_key="k", http_client=client, capabilities={"supports_streaming": False}
    )
    adapter = build_adapter("anthropic", config)
    with pytest.raises(AdapterError) as caught:
        await adapter.complete(request(stream=True))
    assert caught.value.error_class == "capability" and sent == []


def _counting_client() -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    sent: list[httpx.Request] = []

    def handle(r: httpx.Request) -> httpx.Response:
        sent.append(r)
        return httpx.Response(500)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle)), sent


@pytest.mark.anyio
async def test_a_missing_key_names_its_variable_before_anything_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from metis.registry import NotConfiguredError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client, sent = _counting_client()
    adapter = build_adapter("anthropic", http_client=client)
    with pytest.raises(NotConfiguredError, match="set ANTHROPIC_API_KEY") as caught:
        await adapter.complete(request())
    assert caught.value.api_key_env == "ANTHROPIC_API_KEY" and sent == []
    # a call-time failure like every other: an AdapterError of class auth, never retried
    assert isinstance(caught.value, AuthError) and caught.value.error_class is ErrorClass.AUTH
    assert caught.value.provider == "anthropic" and not caught.value.retryable


@pytest.mark.anyio
async def test_a_model_of_another_provider_is_refused_before_sending() -> None:
    client, sent = _counting_client()
    adapter = build_adapter("anthropic", api_key="k", http_client=client)
    bad = CanonicalRequest(
        model="openai:gpt-4o", messages=[Message.user("hi")], max_output_tokens=9
    )
    with pytest.raises(AdapterError, match="openai:gpt-4o is a model of openai") as caught:
        await adapter.complete(bad)
    assert caught.value.error_class == "invalid_request" and sent == []


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"timeout_seconds": "soon"}, "build_adapter(): timeout_seconds: expected a number"),
        ({"max_retries": -1}, "build_adapter(): max_retries: expected a number >= 0, got -1"),
        (
            {"http_client": httpx.Client()},
            "build_adapter(): http_client: expected an httpx.AsyncClient or an "
            "httpx2.AsyncClient, got a httpx.Client",
        ),
    ],
)
def test_a_wrong_keyword_value_of_build_adapter_is_a_config_error_naming_it(
    given: dict[str, object], said: str
) -> None:
    """Not a pydantic ValidationError from AdapterConfig, which the caller never named."""
    with pytest.raises(ConfigError) as caught:
        build_adapter("anthropic", **given)  # type: ignore[arg-type]
    assert str(caught.value).startswith(said), str(caught.value)


def test_build_adapter_takes_typed_settings_that_win_over_a_config() -> None:
    config = AdapterConfig(api_key="from-config", timeout_seconds=30, max_retries=5)
    adapter = build_adapter("anthropic", config, api_key="from-keyword", max_retries=0)
    assert adapter.config.api_key == "from-keyword" and adapter.config.max_retries == 0
    assert adapter.config.timeout_seconds == 30  # untouched fields stay the config's
    with pytest.raises(ConfigError, match="expected a URL with its scheme"):
        build_adapter("anthropic", base_url="api.example.com")


@pytest.mark.anyio
async def test_an_adapter_never_closed_says_so_and_how_as_a_resource_warning() -> None:
    import gc
    import warnings

    with warnings.catch_warnings():  # what earlier tests left unclosed warns now, not below
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    forgotten = build_adapter("anthropic", AdapterConfig(api_key="k"))
    forgotten.http_client()  # its pool made, as the first call makes it
    with pytest.warns(ResourceWarning, match="the anthropic adapter was never closed") as seen:
        del forgotten
        gc.collect()
    ours = [str(w.message) for w in seen if "adapter was never closed" in str(w.message)]
    assert ours and all("'await adapter.aclose()'" in said for said in ours)
    async with build_adapter("anthropic", AdapterConfig(api_key="k")) as closed:
        closed.http_client()
    unused = build_adapter("anthropic", AdapterConfig(api_key="k"))  # nothing opened
    given = build_adapter("anthropic", AdapterConfig(api_key="k", http_client=httpx.AsyncClient()))
    given.http_client()  # the caller's client, the caller's to close
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always", ResourceWarning)
        del closed, unused, given
        gc.collect()
    assert not [w for w in later if "adapter was never closed" in str(w.message)]
