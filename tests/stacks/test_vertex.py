"""Google Vertex AI: the vertex and vertex_anthropic stacks and the google_auth stage.

Vertex's URL forms (global and regional, project and location), Claude's rawPredict body
(``anthropic_version`` in it, no ``model``), Application Default Credentials refreshed in a
worker thread and cached until expiry (google-auth's own Credentials, faked: nothing reaches
the network), what is refused before anything is sent, the emulator answering as Vertex does
when the token is wrong, and the recorded Vertex exchanges replayed through the vertex stack.
"""

from __future__ import annotations

import pytest

pytest.importorskip("google.auth", reason="the test extra installs it (metis[vertex])")

import datetime
import json
import sys
import threading
from pathlib import Path
from typing import Any

import google.auth
import httpx
from google.auth import exceptions as google_exceptions
from google.oauth2.credentials import Credentials

from metis import AdapterConfig, AuthError, ConfigError, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.registry import NotConfiguredError
from metis.testing.emulator import Emulator

from ..recordings import ROOT, cassettes, interactions

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

GEMINI_REPLY = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "Hi."}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "r1",
}
CLAUDE_REPLY = {
    "id": "msg_vrtx_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 2},
}
CLAUDE_MODEL = "claude-sonnet-4-5@20250929"
ENVIRONMENT = (
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_VERTEX_PROJECT",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_VERTEX_LOCATION",
    "CLOUD_ML_REGION",
)


class Peer:
    """An httpx mock transport that keeps every request and answers with ``reply``."""

    def __init__(self, reply: dict[str, Any] | None = None) -> None:
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        default = CLAUDE_REPLY if "/publishers/anthropic/" in request.url.path else GEMINI_REPLY
        return httpx.Response(200, json=self.reply or default)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def valid_credentials(token: str = "ya29.valid") -> Credentials:
    expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return Credentials(token=token, expiry=expiry + datetime.timedelta(hours=1))


def vertex(stack: str, peer: Peer, **options: Any) -> Adapter:
    options = {"project": "my-project", "location": "us-east5", **options}
    options.setdefault("google_credentials", valid_credentials())
    config = AdapterConfig(http_client=peer.client(), settings=options)
    return build_adapter(stack, config, tool_id_store=InMemoryToolIdStore())


def ask(stack: str = "vertex", model: str = "gemini-2.5-flash") -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{stack}:{model}", messages=[Message.user("Hello")], max_output_tokens=64
    )


@pytest.fixture(autouse=True)
def no_google_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


# URL forms -------------------------------------------------------------------------------------

PREFIX = "/projects/my-project/locations"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("location", "stream", "url"),
    [
        (
            "global",
            False,
            f"https://aiplatform.googleapis.com/v1beta1{PREFIX}/global"
            "/publishers/google/models/gemini-2.5-flash:generateContent",
        ),
        (
            "us-central1",
            False,
            f"https://us-central1-aiplatform.googleapis.com/v1beta1{PREFIX}/us-central1"
            "/publishers/google/models/gemini-2.5-flash:generateContent",
        ),
        (
            "europe-west4",
            True,
            f"https://europe-west4-aiplatform.googleapis.com/v1beta1{PREFIX}/europe-west4"
            "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        ),
    ],
)
async def test_gemini_on_vertex_at_the_global_and_regional_urls(
    location: str, stream: bool, url: str
) -> None:
    peer = Peer()
    if stream:
        peer_body = 'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi."}]},'
        peer_body += '"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,'
        peer_body += '"candidatesTokenCount":2}}\r\n\r\n'

        def streamed(request: httpx.Request) -> httpx.Response:
            peer.requests.append(request)
            return httpx.Response(200, content=peer_body.encode())

        client = httpx.AsyncClient(transport=httpx.MockTransport(streamed))
        options = {"project": "my-project", "location": location}
        config = AdapterConfig(
            http_client=client, settings={**options, "google_credentials": valid_credentials()}
        )
        events = [e async for e in build_adapter("vertex", config).stream(ask())]
        assert events[-1].stop_reason.kind is StopKind.END_TURN  # type: ignore[attr-defined]
    else:
        response = await vertex("vertex", peer, location=location).complete(ask())
        assert response.content[0].text == "Hi."  # type: ignore[union-attr]
    (sent,) = peer.requests
    assert str(sent.url) == url
    assert sent.headers["authorization"] == "Bearer ya29.valid"
    assert "x-goog-api-key" not in sent.headers


@pytest.mark.anyio
@pytest.mark.parametrize(("stream", "method"), [(False, "rawPredict"), (True, "streamRawPredict")])
async def test_claude_on_vertex_uses_raw_predict_with_vertex_s_body(
    stream: bool, method: str
) -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        peer.requests.append(request)
        if not stream:
            return httpx.Response(200, json=CLAUDE_REPLY)
        events = [
            {"type": "message_start", "message": {**CLAUDE_REPLY, "content": []}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hi."},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        ]
        text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return httpx.Response(200, content=text.encode())

    peer = Peer()
    config = AdapterConfig(
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(reply)),
        settings={
            "project": "my-project",
            "location": "global",
            "google_credentials": valid_credentials(),
        },
    )
    adapter = build_adapter("vertex_anthropic", config)
    request = ask("vertex_anthropic", CLAUDE_MODEL)
    if stream:
        events = [e async for e in adapter.stream(request)]
        assert events[-1].stop_reason.kind is StopKind.END_TURN  # type: ignore[attr-defined]
    else:
        response = await adapter.complete(request)
        assert response.content[0].text == "Hi."  # type: ignore[union-attr]
    (sent,) = peer.requests
    assert str(sent.url) == (
        f"https://aiplatform.googleapis.com/v1{PREFIX}/global/publishers/anthropic/models/"
        f"{CLAUDE_MODEL}:{method}"
    )
    body = json.loads(sent.content)
    assert "model" not in body and body["anthropic_version"] == "vertex-2023-10-16"
    assert body["stream"] is stream and body["max_tokens"] == 64
    assert "anthropic-version" not in sent.headers and "x-api-key" not in sent.headers
    assert sent.headers["authorization"] == "Bearer ya29.valid"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "project_env", "location_env"),
    [
        ("vertex", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"),
        ("vertex_anthropic", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"),
    ],
)
async def test_project_and_location_come_from_the_environment(
    stack: str, project_env: str, location_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(project_env, "env-project")
    monkeypatch.setenv(location_env, "asia-northeast1")
    peer = Peer()
    config = AdapterConfig(
        http_client=peer.client(), settings={"google_credentials": valid_credentials()}
    )
    await build_adapter(stack, config).complete(ask(stack, CLAUDE_MODEL))
    url = peer.requests[0].url
    assert url.host == "asia-northeast1-aiplatform.googleapis.com"
    assert (
        url.path.startswith("/v1")
        and "/projects/env-project/locations/asia-northeast1/" in url.path
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["vertex", "vertex_anthropic"])
@pytest.mark.parametrize(
    ("missing", "names"),
    [("project", "GOOGLE_CLOUD_PROJECT"), ("location", "GOOGLE_CLOUD_LOCATION")],
)
async def test_a_missing_project_or_location_is_not_configured_and_nothing_is_sent(
    stack: str, missing: str, names: str
) -> None:
    peer = Peer()
    options: dict[str, Any] = {
        "project": "p",
        "location": "global",
        "google_credentials": valid_credentials(),
    }
    del options[missing]
    config = AdapterConfig(http_client=peer.client(), settings=options)
    with pytest.raises(NotConfiguredError, match=names):
        await build_adapter(stack, config).complete(ask(stack, CLAUDE_MODEL))
    assert peer.requests == []


# Application Default Credentials -----------------------------------------------------------------


class FakeADC(Credentials):
    """google-auth user credentials whose refresh mints a token locally, recording the thread."""

    refreshed_in: list[threading.Thread]

    def refresh(self, request: Any) -> None:
        self.refreshed_in.append(threading.current_thread())
        self.token = f"ya29.fresh-{len(self.refreshed_in)}"
        self.expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(
            seconds=self.lifetime
        )

    lifetime = 3600.0


@pytest.fixture
def adc(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    found: dict[str, Any] = {"calls": 0, "credentials": None, "scopes": None}

    def default(scopes: Any = None, **_: Any) -> tuple[Any, str]:
        found["calls"] += 1
        found["scopes"] = scopes
        credentials = FakeADC(token=None)
        credentials.refreshed_in = []
        found["credentials"] = credentials
        return credentials, "adc-project"

    monkeypatch.setattr(google.auth, "default", default)
    return found


@pytest.mark.anyio
async def test_adc_is_found_and_refreshed_off_the_event_loop_then_cached(
    adc: dict[str, Any],
) -> None:
    peer = Peer()
    config = AdapterConfig(
        http_client=peer.client(), settings={"project": "p", "location": "global"}
    )
    adapter = build_adapter("vertex", config)
    await adapter.complete(ask())
    await adapter.complete(ask())
    credentials = adc["credentials"]
    assert adc["calls"] == 1 and adc["scopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    assert len(credentials.refreshed_in) == 1  # cached until it expires
    assert credentials.refreshed_in[0] is not threading.main_thread()  # in a worker thread
    assert [r.headers["authorization"] for r in peer.requests] == ["Bearer ya29.fresh-1"] * 2


@pytest.mark.anyio
async def test_an_expired_token_is_refreshed_before_the_request(adc: dict[str, Any]) -> None:
    peer = Peer()
    config = AdapterConfig(
        http_client=peer.client(), settings={"project": "p", "location": "global"}
    )
    adapter = build_adapter("vertex", config)
    await adapter.complete(ask())
    adc["credentials"].expiry = datetime.datetime(2000, 1, 1)  # it has expired since
    await adapter.complete(ask())
    assert [r.headers["authorization"] for r in peer.requests] == [
        "Bearer ya29.fresh-1",
        "Bearer ya29.fresh-2",
    ]


@pytest.mark.anyio
async def test_no_adc_is_not_configured_and_names_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def default(**_: Any) -> Any:
        raise google_exceptions.DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", default)
    peer = Peer()
    config = AdapterConfig(
        http_client=peer.client(), settings={"project": "p", "location": "global"}
    )
    with pytest.raises(NotConfiguredError, match="GOOGLE_APPLICATION_CREDENTIALS") as caught:
        await build_adapter("vertex_anthropic", config).complete(
            ask("vertex_anthropic", CLAUDE_MODEL)
        )
    assert "gcloud auth application-default login" in str(caught.value) and peer.requests == []


@pytest.mark.anyio
async def test_an_expired_credential_that_cannot_refresh_is_an_auth_error_not_retried() -> None:
    expired = Credentials(
        token="ya29.old", expiry=datetime.datetime(2000, 1, 1)
    )  # no refresh token
    peer = Peer()
    adapter = vertex("vertex", peer, google_credentials=expired)
    with pytest.raises(AuthError, match="could not be refreshed") as caught:
        await adapter.complete(ask())
    assert caught.value.retryable is False and peer.requests == []


@pytest.mark.anyio
async def test_without_google_auth_installed_it_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "google.auth", None)
    peer = Peer()
    config = AdapterConfig(
        http_client=peer.client(), settings={"project": "p", "location": "global"}
    )
    with pytest.raises(NotConfiguredError, match=r"metis\[vertex\]"):
        await build_adapter("vertex", config).complete(ask())
    assert peer.requests == []


# The emulator: Vertex's own refusals -------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["vertex", "vertex_anthropic"])
async def test_a_wrong_token_is_an_auth_error_sent_once(stack: str) -> None:
    with Emulator(api_keys=["ya29.good"]) as emulator:
        options = {"project": "p", "location": "global"}
        bad = AdapterConfig(
            base_url=emulator.base_url(stack),
            settings={**options, "google_credentials": valid_credentials("ya29.bad")},
        )
        with pytest.raises(AuthError, match="invalid authentication credentials") as caught:
            await build_adapter(stack, bad).complete(ask(stack, CLAUDE_MODEL))
        assert caught.value.provider_status == 401 and emulator.stats.requests == 1
        good = AdapterConfig(
            base_url=emulator.base_url(stack),
            settings={**options, "google_credentials": valid_credentials("ya29.good")},
        )
        response = await build_adapter(stack, good).complete(ask(stack, CLAUDE_MODEL))
        assert response.stop_reason.kind is StopKind.END_TURN


@pytest.mark.anyio
async def test_claude_on_vertex_counts_at_count_tokens_with_the_model_in_the_body() -> None:
    """Before: the offline estimate ("no counting endpoint beside ...:rawPredict"), though
    Vertex AI counts Claude's tokens at ``.../publishers/anthropic/models/count-tokens:
    rawPredict``; now asked there, through the auth flow, and the emulator answers it."""
    emulator = Emulator(api_keys=["ya29.valid"])
    settings = {"project": "p", "location": "us-east5", "google_credentials": valid_credentials()}
    config = AdapterConfig(http_client=emulator.client(), settings=settings)
    adapter = build_adapter("vertex_anthropic", config)
    counted = await adapter.count_tokens(ask("vertex_anthropic", "claude-sonnet-4-5"))
    assert counted.source == "provider" and counted.input_tokens > 0, counted.detail
    (sent,) = emulator.requests
    assert sent.path == "/v1/projects/p/locations/us-east5/publishers/anthropic/models/" + (
        "count-tokens:rawPredict"
    )
    assert sent.json() == {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        "anthropic_version": "vertex-2023-10-16",
    }
    assert sent.headers["authorization"] == "Bearer ya29.valid"


def test_the_emulator_refuses_an_api_key_and_claude_s_body_without_vertex_s_fields() -> None:
    with Emulator() as emulator:
        gemini = "/v1beta1/projects/p/locations/global/publishers/google/models/m:generateContent"
        keyed = httpx.post(
            emulator.url + gemini,
            headers={"x-goog-api-key": "AIza-key"},
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
        claude = "/v1/projects/p/locations/global/publishers/anthropic/models/c:rawPredict"
        with_model = httpx.post(
            emulator.url + claude,
            headers={"authorization": "Bearer t"},
            json={
                "model": "c",
                "anthropic_version": "vertex-2023-10-16",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        no_version = httpx.post(
            emulator.url + claude,
            headers={"authorization": "Bearer t"},
            json={"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]},
        )
    assert keyed.status_code == 401 and keyed.json()["error"]["status"] == "UNAUTHENTICATED"
    assert with_model.status_code == 400 and "model" in with_model.text
    assert no_version.status_code == 400 and "anthropic_version" in no_version.text


# The recorded exchanges --------------------------------------------------------------------------


def recordings() -> list[Path]:
    return cassettes("vertex")


@pytest.mark.real_traffic
@pytest.mark.anyio
@pytest.mark.skipif(not recordings(), reason=f"no recorded Vertex traffic at {ROOT}")
@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.stem)
async def test_recorded_vertex_replies_replay_through_the_vertex_stack(path: Path) -> None:
    for interaction in interactions(path):
        uri = httpx.URL(interaction["request"]["uri"])
        recorded_request = interaction["request"]["parsed_body"]
        recorded = interaction["response"]["parsed_body"]
        _, _, _, project, _, location, *_, model_and_method = uri.path.split("/")
        peer = Peer(recorded)
        request = CanonicalRequest(
            model=f"vertex:{model_and_method.split(':')[0]}",
            system_prompt=recorded_request["systemInstruction"]["parts"][0]["text"],
            messages=[Message.user(recorded_request["contents"][0]["parts"][0]["text"])],
            max_output_tokens=256,
        )
        adapter = vertex("vertex", peer, project=project, location=location)
        response = await adapter.complete(request)
        sent = peer.requests[0]
        assert sent.url.host == uri.host and sent.url.path == uri.path
        body = json.loads(sent.content)
        assert body["contents"] == recorded_request["contents"]
        assert body["systemInstruction"]["parts"] == recorded_request["systemInstruction"]["parts"]
        candidate = recorded["candidates"][0]
        assert response.content[0].text == candidate["content"]["parts"][0]["text"]  # type: ignore[union-attr]
        assert response.stop_reason.kind is StopKind.END_TURN
        assert response.stop_reason.raw == candidate["finishReason"]
        usage = recorded["usageMetadata"]
        assert response.usage.input_tokens == usage["promptTokenCount"]
        assert response.usage.output_tokens == usage["candidatesTokenCount"]


@pytest.mark.anyio
async def test_credentials_that_are_not_google_auth_s_are_a_config_error() -> None:
    peer = Peer()
    # Refused when the adapter is built, by its typed settings, before anything is sent.
    with pytest.raises(
        ConfigError, match=r"setting .google_credentials.: .*google-auth credentials"
    ):
        await vertex("vertex", peer, google_credentials="/path/to/key.json").complete(ask())
    assert peer.requests == []


@pytest.mark.anyio
async def test_a_token_service_failure_is_retried(
    adc: dict[str, Any],
) -> None:
    failures = [google_exceptions.RefreshError("503 from the token endpoint", retryable=True)]

    class Flaky(FakeADC):
        def refresh(self, request: Any) -> None:
            if failures:
                raise failures.pop()
            super().refresh(request)

    credentials = Flaky(token=None)
    credentials.refreshed_in = []
    peer = Peer()
    adapter = vertex("vertex", peer, google_credentials=credentials)
    response = await adapter.complete(ask())
    assert response.stop_reason.kind is StopKind.END_TURN and len(peer.requests) == 1
    assert failures == [] and len(credentials.refreshed_in) == 1
