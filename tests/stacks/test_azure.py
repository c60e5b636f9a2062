"""Azure OpenAI / Foundry: the azure and azure_responses stacks and the azure_auth stage.

The v1 endpoint at the caller's resource, the ``api-key`` header or an Entra ID bearer token
(a token provider, or azure-identity's DefaultAzureCredential, faked here), deployment names as
wire names, what is refused before anything is sent, the emulator answering as Azure does when
the key or token is wrong, and the recorded Azure exchange replayed through the new stack.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from metis import AdapterConfig, AuthError, ConfigError, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.registry import NotConfiguredError
from metis.testing.emulator import Emulator

from ..conftest import Waits
from ..helpers import ImportOnUse
from ..recordings import ROOT, cassettes, interactions

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken

if importlib.util.find_spec("azure.identity") is None:  # found without importing it
    pytest.skip("the test extra installs it (metis[azure])", allow_module_level=True)
azure_credentials = ImportOnUse("azure.core.credentials")
azure_exceptions = ImportOnUse("azure.core.exceptions")
azure_identity = ImportOnUse("azure.identity")  # imported by the tests using them (not to collect)

CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-2024-11-20",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}
RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
}


class Peer:
    """An httpx mock transport that keeps every request and answers with ``reply``."""

    def __init__(self, reply: dict[str, Any] | None = None) -> None:
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        body = self.reply or (RESPONSES_REPLY if path.endswith("/responses") else CHAT_REPLY)
        return httpx.Response(200, json=body)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def azure(stack: str, peer: Peer, *, api_key: str | None = "azure-key", **config: Any) -> Adapter:
    config.setdefault("settings", {"resource": "my-resource"})
    settings = AdapterConfig(api_key=api_key, http_client=peer.client(), **config)
    return build_adapter(stack, settings, tool_id_store=InMemoryToolIdStore())


def ask(stack: str = "azure", deployment: str = "my-gpt-4o") -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{stack}:{deployment}", messages=[Message.user("Hello")], max_output_tokens=64
    )


@pytest.fixture(autouse=True)
def no_azure_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_RESOURCE", "AZURE_RESOURCE_NAME"):
        monkeypatch.delenv(name, raising=False)


# The v1 endpoint and the api-key -------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "path"),
    [("azure", "/openai/v1/chat/completions"), ("azure_responses", "/openai/v1/responses")],
)
async def test_the_v1_endpoint_of_the_resource_with_the_api_key_and_the_deployment_name(
    stack: str, path: str
) -> None:
    peer = Peer()
    response = await azure(stack, peer).complete(ask(stack))
    (sent,) = peer.requests
    assert str(sent.url) == f"https://my-resource.openai.azure.com{path}"  # no api-version
    assert sent.headers["api-key"] == "azure-key" and "authorization" not in sent.headers
    assert json.loads(sent.content)["model"] == "my-gpt-4o"
    assert response.content[0].text == "Hi."  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_resource_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE", "env-resource")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "env-key")
    peer = Peer()
    await azure("azure", peer, api_key=None, settings={}).complete(ask())
    assert peer.requests[0].url.host == "env-resource.openai.azure.com"
    assert peer.requests[0].headers["api-key"] == "env-key"


@pytest.mark.anyio
async def test_a_foundry_base_url_is_used_as_given() -> None:
    peer = Peer()
    base = "https://my-project.services.ai.azure.com"
    await azure("azure", peer, base_url=base, settings={}).complete(ask())
    assert str(peer.requests[0].url) == base + "/openai/v1/chat/completions"


@pytest.mark.anyio
async def test_no_resource_is_not_configured_and_names_what_to_set() -> None:
    peer = Peer()
    with pytest.raises(NotConfiguredError, match="AZURE_OPENAI_RESOURCE") as caught:
        await azure("azure", peer, settings={}).complete(ask())
    assert "base_url" in str(caught.value) and peer.requests == []


@pytest.mark.anyio
async def test_a_resource_that_would_change_the_url_is_refused() -> None:
    peer = Peer()
    with pytest.raises(ConfigError, match="resource"):
        await azure("azure", peer, settings={"resource": "evil.example/x?"}).complete(ask())
    assert peer.requests == []


# Entra ID --------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["plain", "async", "async object"])
async def test_without_a_key_a_token_provider_gives_the_bearer_token(kind: str) -> None:
    calls: list[str] = []

    def plain() -> str:
        calls.append("plain")
        return "entra-token"

    async def asynchronous() -> str:
        calls.append("async")
        return "entra-token"

    class AsyncProvider:
        async def __call__(self) -> str:
            calls.append("async object")
            return "entra-token"

    provider = {"plain": plain, "async": asynchronous, "async object": AsyncProvider()}[kind]
    peer = Peer()
    options = {"resource": "r", "azure_ad_token_provider": provider}
    await azure("azure_responses", peer, api_key=None, settings=options).complete(
        ask("azure_responses")
    )
    sent = peer.requests[0]
    assert sent.headers["authorization"] == "Bearer entra-token" and "api-key" not in sent.headers
    assert calls == [kind]


class FakeCredential:
    """Stands in for azure.identity.DefaultAzureCredential."""

    instances: list[FakeCredential] = []
    lifetime = 3600.0
    error: Exception | None = None

    def __init__(self) -> None:
        self.scopes: list[str] = []
        FakeCredential.instances.append(self)

    def get_token(self, *scopes: str) -> AccessToken:
        if FakeCredential.error is not None:
            raise FakeCredential.error
        self.scopes += scopes
        return azure_credentials.AccessToken(
            f"token-{len(self.scopes)}", int(time.time() + self.lifetime)
        )


@pytest.fixture
def fake_identity(monkeypatch: pytest.MonkeyPatch) -> type[FakeCredential]:
    import azure.identity

    FakeCredential.instances = []
    FakeCredential.lifetime = 3600.0
    FakeCredential.error = None
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", FakeCredential)
    return FakeCredential


@pytest.mark.anyio
async def test_default_azure_credential_token_is_cached_until_near_expiry(
    fake_identity: type[FakeCredential],
) -> None:
    peer = Peer()
    adapter = azure("azure", peer, api_key=None)
    await adapter.complete(ask())
    await adapter.complete(ask())
    (credential,) = fake_identity.instances
    assert credential.scopes == ["https://cognitiveservices.azure.com/.default"]
    assert [r.headers["authorization"] for r in peer.requests] == ["Bearer token-1"] * 2

    fake_identity.lifetime = 60.0  # expires within the refresh margin: fetched every time
    fresh = azure("azure", peer, api_key=None)
    await fresh.complete(ask())
    await fresh.complete(ask())
    assert [r.headers["authorization"] for r in peer.requests[2:]] == [
        "Bearer token-1",
        "Bearer token-2",
    ]


@pytest.mark.anyio
async def test_no_key_and_no_identity_is_not_configured(
    fake_identity: type[FakeCredential],
) -> None:
    fake_identity.error = azure_identity.CredentialUnavailableError(
        "EnvironmentCredential: not configured"
    )
    peer = Peer()
    with pytest.raises(NotConfiguredError, match="AZURE_OPENAI_API_KEY") as caught:
        await azure("azure", peer, api_key=None).complete(ask())
    assert "az login" in str(caught.value) and peer.requests == []


@pytest.mark.anyio
async def test_an_identity_entra_refuses_is_an_auth_error_not_retried(
    fake_identity: type[FakeCredential],
) -> None:
    fake_identity.error = azure_exceptions.ClientAuthenticationError(
        "AADSTS700082: the refresh token has expired"
    )
    peer = Peer()
    with pytest.raises(AuthError, match="AADSTS700082") as caught:
        await azure("azure", peer, api_key=None).complete(ask())
    assert caught.value.retryable is False and peer.requests == []
    assert len(fake_identity.instances) == 1


@pytest.mark.anyio
async def test_without_azure_identity_installed_it_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    peer = Peer()
    with pytest.raises(NotConfiguredError, match=r"metis\[azure\]"):
        await azure("azure", peer, api_key=None).complete(ask())
    assert peer.requests == []


# The emulator: Azure's own refusals ------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["azure", "azure_responses"])
@pytest.mark.parametrize(
    ("credential", "message"),
    [
        ({"api_key": "wrong-key"}, "invalid subscription key"),
        ({"settings": {"resource": "r", "azure_ad_token_provider": lambda: "bad"}}, "audience"),
    ],
)
async def test_a_wrong_key_or_token_is_an_auth_error_sent_once(
    stack: str, credential: dict[str, Any], message: str
) -> None:
    with Emulator(api_keys=["good-key", "good-token"]) as emulator:
        settings: dict[str, Any] = {"api_key": None, **credential}
        config = AdapterConfig(base_url=emulator.base_url(stack), **settings)
        adapter = build_adapter(stack, config, tool_id_store=InMemoryToolIdStore())
        with pytest.raises(AuthError, match=message) as caught:
            await adapter.complete(ask(stack))
        assert caught.value.provider_status == 401
        assert emulator.stats.requests == 1  # an auth error is not retried
        good = AdapterConfig(base_url=emulator.base_url(stack), api_key="good-key")
        response = await build_adapter(stack, good).complete(ask(stack))
        assert response.stop_reason.kind is StopKind.END_TURN
        await adapter.aclose()


def test_the_emulator_refuses_a_request_without_credentials() -> None:
    with Emulator() as emulator:
        reply = httpx.post(
            emulator.base_url("azure") + "/openai/v1/chat/completions",
            json={"model": "d", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert (
        reply.status_code == 401 and "missing subscription key" in reply.json()["error"]["message"]
    )


# The recorded exchange ---------------------------------------------------------------------------


def recordings() -> list[Path]:
    return cassettes("azure")


@pytest.mark.real_traffic
@pytest.mark.anyio
@pytest.mark.skipif(not recordings(), reason=f"no recorded Azure traffic at {ROOT}")
@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.stem)
async def test_recorded_azure_replies_replay_through_the_azure_stack(path: Path) -> None:
    for interaction in interactions(path):
        recorded_request = interaction["request"]["parsed_body"]
        recorded = interaction["response"]["parsed_body"]
        peer = Peer(recorded)
        request = CanonicalRequest(
            model=f"azure:{recorded_request['model']}",
            messages=[Message.user(recorded_request["messages"][-1]["content"])],
            max_output_tokens=256,
        )
        host = httpx.URL(interaction["request"]["uri"]).host
        options = {"resource": host.split(".")[0]}
        response = await azure("azure", peer, settings=options).complete(request)
        sent = json.loads(peer.requests[0].content)
        assert sent["model"] == recorded_request["model"]  # the deployment name
        assert sent["messages"] == recorded_request["messages"]
        assert peer.requests[0].url.host == host
        choice = recorded["choices"][0]
        assert response.content[0].text == choice["message"]["content"]  # type: ignore[union-attr]
        assert response.stop_reason.kind is StopKind.END_TURN
        assert response.stop_reason.raw == choice["finish_reason"]
        assert response.usage.input_tokens == recorded["usage"]["prompt_tokens"]
        assert response.usage.output_tokens == recorded["usage"]["completion_tokens"]


# Azure's stream: a prompt-filter chunk first, content-filter results on every choice ------------

FILTERS = {"hate": {"filtered": False, "severity": "safe"}}
AZURE_STREAM = [
    {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": FILTERS}],
    },
    *(
        {
            "choices": [
                {
                    "content_filter_results": FILTERS if delta.get("content") else {},
                    "delta": delta,
                    "finish_reason": finish,
                    "index": 0,
                    "logprobs": None,
                }
            ],
            "created": 1741880483,
            "id": "chatcmpl-BAeyRj7gU6aCNSSAskAFbupBWYMIT",
            "model": "gpt-4o-2024-11-20",
            "object": "chat.completion.chunk",
            "system_fingerprint": "fp_ded0d14823",
            "usage": None,
        }
        for delta, finish in [
            ({"content": "", "refusal": None, "role": "assistant"}, None),
            ({"content": "The capital"}, None),
            ({"content": " is Paris."}, None),
            ({}, "stop"),
        ]
    ),
    {
        "choices": [],
        "created": 1741880483,
        "id": "chatcmpl-BAeyRj7gU6aCNSSAskAFbupBWYMIT",
        "model": "gpt-4o-2024-11-20",
        "object": "chat.completion.chunk",
        "usage": {"prompt_tokens": 14, "completion_tokens": 6, "total_tokens": 20},
    },
]


@pytest.mark.anyio
async def test_an_azure_stream_with_filter_results_reads_as_any_other() -> None:
    from metis.model import MessageComplete
    from metis.stages.policy.invariants import StreamChecker

    text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in AZURE_STREAM) + "data: [DONE]\n\n"
    sent: list[httpx.Request] = []

    def peer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, content=text.encode())

    config = AdapterConfig(
        api_key="k",
        settings={"resource": "r"},
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(peer)),
    )
    events = [e async for e in build_adapter("azure", config).stream(ask())]
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert final.final_content[0].text == "The capital is Paris."  # type: ignore[union-attr]
    assert final.stop_reason.kind is StopKind.END_TURN
    assert (final.usage.input_tokens, final.usage.output_tokens) == (14, 6)
    assert json.loads(sent[0].content)["stream_options"] == {"include_usage": True}
    # the prompt-filter chunk (no id, no model) does not stand for the message
    assert final.message_id == "chatcmpl-BAeyRj7gU6aCNSSAskAFbupBWYMIT"
    assert final.model == "gpt-4o-2024-11-20"


async def _azure_stream(chunks: list[dict[str, Any]]) -> list[Any]:
    text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    config = AdapterConfig(
        api_key="k",
        settings={"resource": "r"},
        http_client=httpx.AsyncClient(
            transport=httpx.MockTransport(lambda _: httpx.Response(200, content=text.encode()))
        ),
    )
    return [e async for e in build_adapter("azure", config).stream(ask())]


@pytest.mark.anyio
async def test_an_azure_stream_its_filter_cuts_ends_content_filter_with_what_came() -> None:
    from metis.model import MessageComplete

    cut = {"violence": {"filtered": True, "severity": "medium"}, **FILTERS}
    chunks = [dict(chunk) for chunk in AZURE_STREAM]
    ending = chunks[-2]["choices"][0]
    chunks[-2] = {
        **chunks[-2],
        "choices": [{**ending, "finish_reason": "content_filter", "content_filter_results": cut}],
    }
    final = (await _azure_stream(chunks))[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.CONTENT_FILTER
    assert final.stop_reason.raw == "content_filter"
    assert final.final_content[0].text == "The capital is Paris."  # type: ignore[union-attr]
    assert final.usage.output_tokens == 6  # the usage chunk after it is read too
    assert final.message_id == "chatcmpl-BAeyRj7gU6aCNSSAskAFbupBWYMIT"


@pytest.mark.anyio
async def test_the_emulators_azure_stream_reads_with_its_id_and_model() -> None:
    from metis.model import MessageComplete

    emulator = Emulator()
    config = AdapterConfig(
        api_key="k",
        base_url=emulator.base_url("azure"),
        http_client=emulator.client(),
    )
    events = [e async for e in build_adapter("azure", config).stream(ask())]
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.END_TURN and final.final_content
    assert final.message_id and final.message_id.startswith("chatcmpl-")
    assert final.model


@pytest.mark.anyio
async def test_the_emulator_answers_a_rate_limit_as_azure_does_and_it_is_retried(
    no_backoff: Waits,
) -> None:
    with Emulator() as emulator:
        emulator.push_fault("rate_limit=1", provider="azure")
        config = AdapterConfig(api_key="k", base_url=emulator.base_url("azure"))
        adapter = build_adapter("azure", config)
        response = await adapter.complete(ask())
        assert response.stop_reason.kind is StopKind.END_TURN
        assert [r.status for r in emulator.requests] == [429, 200]
        assert no_backoff == [1.0]  # Azure's retry-after, in seconds


@pytest.mark.anyio
async def test_a_token_provider_that_is_not_callable_is_a_config_error() -> None:
    peer = Peer()
    options = {"resource": "r", "azure_ad_token_provider": "a-token"}
    with pytest.raises(ConfigError, match="azure_ad_token_provider"):
        await azure("azure", peer, api_key=None, settings=options).complete(ask())
    assert peer.requests == []


@pytest.mark.anyio
async def test_an_entra_outage_is_retried(fake_identity: type[FakeCredential]) -> None:
    from azure.core.exceptions import ServiceRequestError

    fake_identity.error = ServiceRequestError("connection reset by login.microsoftonline.com")
    peer = Peer()
    adapter = azure("azure", peer, api_key=None)
    waited: list[float] = []

    async def recover(seconds: float) -> None:
        waited.append(seconds)
        fake_identity.error = None

    adapter.pipeline["retry"].sleep = recover  # type: ignore[attr-defined]
    response = await adapter.complete(ask())
    assert response.stop_reason.kind is StopKind.END_TURN
    assert len(waited) == 1 and peer.requests[0].headers["authorization"] == "Bearer token-1"
