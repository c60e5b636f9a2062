"""Cloud access tokens (metis/stages/auth/token_cache.py, docs/cloud.md): however many calls need a
token at once, one fetch serves them; every call waits within its own deadline and cancel; a
fetch that fails is a classified error with the fetcher's exception chained and no secret in
it. Through the azure stack (a token provider, or DefaultAzureCredential, faked) and the vertex
stack (google-auth credentials whose refresh is faked); nothing reaches the network."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("azure.identity") is None:  # found without importing it
    pytest.skip("the test extra installs it (metis[azure])", allow_module_level=True)
pytest.importorskip("google.auth", reason="the test extra installs it (metis[vertex])")

import datetime
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import httpx
from google.oauth2.credentials import Credentials

from metis import AdapterConfig, AuthError, CancelledError, NetworkError, build_adapter
from metis.adapter import Adapter
from metis.errors import ErrorClass
from metis.model import CanonicalRequest, Message
from metis.pipeline.stores import InMemoryToolIdStore
from metis.telemetry import CallFailed, ListSink

from ..helpers import ImportOnUse

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken

azure_credentials = ImportOnUse("azure.core.credentials")  # imported by the tests using it

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for


CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}
GEMINI_REPLY = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "Hi."}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
}
CALLS = 20
"""Calls waiting for one token at once: every one is blocked on the fetch before the gate opens,
so twenty prove the single flight as well as two hundred did (each call runs the whole stack)."""
TOKEN_TAIL = "7f3a9c2e1b5d"
SAFETY_SECONDS = 10.0
"""How long a stuck fake fetch waits before it gives up by itself: never reached when the
fetch is bounded, and it keeps a test of unbounded code from hanging the run."""


class Gate:
    """A token fetch that waits until the test opens it, counting the fetches and whether
    each one has ended."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.started = 0
        self.ended = 0
        self.error: Exception | None = None
        self.opened_on_loop: anyio.Event | None = None

    def open(self) -> None:
        """Let the fetches through (on the event loop's thread, or with no async fetch)."""
        self.opened.set()
        if self.opened_on_loop is not None:
            self.opened_on_loop.set()

    async def fetching(self) -> None:
        """Wait until a fetch has begun: a fetch in a worker thread starts some time after its
        task blocks, so waiting for blocked tasks alone races with it on a loaded machine."""
        with anyio.fail_after(SAFETY_SECONDS):
            while not self.started:  # noqa: ASYNC110 (set from a worker thread: no event to await)
                await anyio.sleep(0.005)

    def blocking(self) -> str:
        self.started += 1
        self.opened.wait(SAFETY_SECONDS)
        self.ended += 1
        if self.error is not None:
            raise self.error
        return f"token-{self.started}-{TOKEN_TAIL}"

    async def asynchronous(self) -> str:
        self.started += 1
        self.opened_on_loop = anyio.Event()
        if self.opened.is_set():
            self.opened_on_loop.set()
        with anyio.move_on_after(SAFETY_SECONDS):
            await self.opened_on_loop.wait()
        self.ended += 1
        if self.error is not None:
            raise self.error
        return f"token-{self.started}-{TOKEN_TAIL}"


class Peer:
    """An httpx mock transport that keeps every request and answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.status != 200:  # the server quotes the credential back, as some do
            echoed = request.headers.get("authorization", "").removeprefix("Bearer ")
            body = {"error": {"code": "401", "message": f"Access denied for {echoed}"}}
            return httpx.Response(self.status, json=body)
        reply = GEMINI_REPLY if "aiplatform" in request.url.host else CHAT_REPLY
        return httpx.Response(200, json=reply)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def azure(peer: Peer, provider: Any = None, **config: Any) -> Adapter:
    options: dict[str, Any] = {"resource": "my-resource"}
    if provider is not None:
        options["azure_ad_token_provider"] = provider
    settings = AdapterConfig(http_client=peer.client(), settings=options, **config)
    adapter = build_adapter("azure", settings, tool_id_store=InMemoryToolIdStore())
    return adapter


def vertex(peer: Peer, credentials: Credentials, **config: Any) -> Adapter:
    options = {"project": "p", "location": "us-east5", "google_credentials": credentials}
    settings = AdapterConfig(http_client=peer.client(), settings=options, **config)
    return build_adapter("vertex", settings, tool_id_store=InMemoryToolIdStore())


def ask(model: str = "azure:my-gpt-4o") -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=[Message.user("Hello")], max_output_tokens=64)


def in_an_hour() -> datetime.datetime:
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return now + datetime.timedelta(hours=1)


class GatedCredentials(Credentials):
    """google-auth credentials, expired, whose refresh waits at the gate."""

    gate: Gate

    def refresh(self, request: Any) -> None:
        self.token = self.gate.blocking().replace("token", "ya29.fresh")
        self.expiry = in_an_hour()


def expired_google(gate: Gate) -> GatedCredentials:
    credentials = GatedCredentials(token="ya29.old", expiry=datetime.datetime(2000, 1, 1))
    credentials.gate = gate
    return credentials


class GatedIdentity:
    """Stands in for azure.identity.DefaultAzureCredential; its tokens come through the gate."""

    gate: Gate
    lifetime = 3600.0

    def get_token(self, *scopes: str) -> AccessToken:
        return azure_credentials.AccessToken(self.gate.blocking(), int(time.time() + self.lifetime))


@pytest.fixture
def identity(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[GatedIdentity]]:
    import azure.identity

    GatedIdentity.gate = Gate()
    GatedIdentity.lifetime = 3600.0
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", GatedIdentity)
    yield GatedIdentity
    GatedIdentity.gate.open()


@pytest.fixture(autouse=True)
def no_azure_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_RESOURCE", "AZURE_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)


Source = Callable[[Gate, Peer], tuple[Adapter, str]]
"""Builds an adapter whose token comes through the gate; also the model to ask for."""


def identity_source(gate: Gate, peer: Peer, **config: Any) -> tuple[Adapter, str]:
    GatedIdentity.gate = gate
    return azure(peer, **config), "azure:my-gpt-4o"


def plain_provider_source(gate: Gate, peer: Peer, **config: Any) -> tuple[Adapter, str]:
    return azure(peer, gate.blocking, **config), "azure:my-gpt-4o"


def async_provider_source(gate: Gate, peer: Peer, **config: Any) -> tuple[Adapter, str]:
    return azure(peer, gate.asynchronous, **config), "azure:my-gpt-4o"


def google_source(gate: Gate, peer: Peer, **config: Any) -> tuple[Adapter, str]:
    return vertex(peer, expired_google(gate), **config), "vertex:gemini-2.5-flash"


SOURCES = pytest.mark.parametrize(
    "source",
    [identity_source, plain_provider_source, async_provider_source, google_source],
    ids=["DefaultAzureCredential", "plain provider", "async provider", "google refresh"],
)


async def all_at_once(count: int, call: Callable[[], Awaitable[None]], gate: Gate) -> None:
    """Start ``count`` calls, wait until every one of them waits for the token, open the gate."""
    async with anyio.create_task_group() as tasks:
        for _ in range(count):
            tasks.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        gate.open()


# Single-flight -----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.usefixtures("identity")
@SOURCES
async def test_many_calls_that_need_a_token_at_once_share_one_fetch(source: Source) -> None:
    gate, peer = Gate(), Peer()
    adapter, model = source(gate, peer)

    async def call() -> None:
        await adapter.complete(ask(model))

    await all_at_once(CALLS, call, gate)
    assert gate.started == 1
    assert len(peer.requests) == CALLS
    tokens = {request.headers["authorization"] for request in peer.requests}
    assert tokens == {
        f"Bearer {'ya29.fresh' if source is google_source else 'token'}-1-{TOKEN_TAIL}"
    }


@pytest.mark.anyio
async def test_many_calls_on_an_expiring_identity_token_share_one_refresh(
    identity: type[GatedIdentity],
) -> None:
    peer = Peer()
    adapter = azure(peer)
    identity.lifetime = 60.0  # inside the refresh margin: every call wants a new one
    identity.gate.open()
    await adapter.complete(ask())
    assert identity.gate.started == 1
    identity.gate = gate = Gate()
    identity.lifetime = 3600.0

    async def call() -> None:
        await adapter.complete(ask())

    await all_at_once(CALLS, call, gate)
    assert gate.started == 1
    assert {r.headers["authorization"] for r in peer.requests[1:]} == {
        f"Bearer token-1-{TOKEN_TAIL}"
    }


# Bounded by the deadline and by cancel --------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.usefixtures("identity")
@SOURCES
async def test_a_token_fetch_that_does_not_end_is_bounded_by_the_call_s_timeout(
    source: Source,
) -> None:
    gate, peer = Gate(), Peer()
    adapter, model = source(gate, peer, timeout_seconds=0.5, max_retries=0)
    try:
        with pytest.raises(NetworkError, match="deadline ran out while waiting for"):
            await adapter.complete(ask(model))
        assert gate.started == 1 and gate.ended == 0  # still stuck when the call gave up
        assert peer.requests == []
    finally:
        gate.open()


@pytest.mark.anyio
@pytest.mark.usefixtures("identity")
@SOURCES
async def test_cancel_cuts_a_token_fetch_short(source: Source) -> None:
    gate, peer = Gate(), Peer()
    adapter, model = source(gate, peer)
    request = ask(model)
    try:

        async def call() -> None:
            with pytest.raises(CancelledError):
                await adapter.complete(request)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await gate.fetching()
            assert adapter.cancel(request.request_id) is True
        assert gate.started == 1 and gate.ended == 0
        assert peer.requests == []
    finally:
        gate.open()


@pytest.mark.anyio
@pytest.mark.usefixtures("identity")
@pytest.mark.parametrize(
    ("source", "fetches"),
    [(identity_source, 1), (async_provider_source, 2)],
    ids=["blocking: the thread goes on", "async: started again"],
)
async def test_when_the_fetching_call_is_cancelled_a_waiting_call_takes_the_fetch_over(
    source: Source, fetches: int
) -> None:
    gate, peer = Gate(), Peer()
    adapter, model = source(gate, peer)
    first = ask(model)
    try:

        async def cancelled() -> None:
            with pytest.raises(CancelledError):
                await adapter.complete(first)

        async def waiting() -> None:
            await adapter.complete(ask(model))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancelled)
            await gate.fetching()  # the first call runs the fetch
            for _ in range(5):
                tasks.start_soon(waiting)
            await anyio.wait_all_tasks_blocked()
            assert adapter.cancel(first.request_id) is True
            await anyio.wait_all_tasks_blocked()
            gate.open()
    finally:
        gate.open()
    assert gate.started == fetches
    assert len(peer.requests) == 5


# Failures: classified, chained, redacted -----------------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


CLIENT_SECRET = "client-secret-value-0123456789"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("failure", "says"),
    [
        (RuntimeError(f"token endpoint said no to secret {CLIENT_SECRET}"), "RuntimeError"),
        (ValueError("malformed token response"), "malformed token response"),
        (Unprintable(), "Unprintable"),
    ],
    ids=["runtime error quoting the client secret", "value error", "unprintable"],
)
@pytest.mark.parametrize("source", [plain_provider_source, async_provider_source, google_source])
async def test_a_failing_token_source_is_an_auth_error_with_its_cause_chained(
    monkeypatch: pytest.MonkeyPatch, source: Source, failure: Exception, says: str
) -> None:
    monkeypatch.setenv("AZURE_CLIENT_SECRET", CLIENT_SECRET)
    gate, peer = Gate(), Peer()
    gate.error = failure
    gate.open()
    adapter, model = source(gate, peer)
    request = ask(model)
    with pytest.raises(AuthError, match=says) as caught:
        await adapter.complete(request)
    error = caught.value
    assert error.error_class is ErrorClass.AUTH and error.retryable is False
    assert error.__cause__ is failure
    assert error.request_id == request.request_id
    if source is not google_source:  # azure-identity's environment secret
        shown = [str(error), json.dumps(error.describe()), repr(failure.args)]
        assert [text for text in shown if CLIENT_SECRET in text] == []
    assert peer.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize("returned", [None, "", 42])
async def test_a_token_provider_that_returns_no_token_is_an_auth_error(returned: Any) -> None:
    peer = Peer()
    with pytest.raises(AuthError, match="gave no token"):
        await azure(peer, lambda: returned).complete(ask())
    assert peer.requests == []


@pytest.mark.anyio
async def test_an_identity_that_fails_oddly_is_an_auth_error_with_its_cause(
    identity: type[GatedIdentity],
) -> None:
    identity.gate.error = failure = KeyError("expires_on")
    identity.gate.open()
    with pytest.raises(AuthError, match="Entra ID failed: KeyError") as caught:
        await azure(Peer()).complete(ask())
    assert caught.value.__cause__ is failure


@pytest.mark.anyio
async def test_one_failed_fetch_fails_every_call_that_waited_for_it() -> None:
    gate, peer = Gate(), Peer()
    gate.error = RuntimeError("the token service is down")
    adapter = azure(peer, gate.blocking)
    requests = [ask() for _ in range(50)]
    failed: list[AuthError] = []

    async def call(request: CanonicalRequest) -> None:
        with pytest.raises(AuthError) as caught:
            await adapter.complete(request)
        failed.append(caught.value)

    async with anyio.create_task_group() as tasks:
        for request in requests:
            tasks.start_soon(call, request)
        await anyio.wait_all_tasks_blocked()
        gate.open()
    assert gate.started == 1 and peer.requests == []
    assert {e.request_id for e in failed} == {r.request_id for r in requests}
    assert len({id(e) for e in failed}) == len(requests)  # each call its own error


@pytest.mark.anyio
@pytest.mark.parametrize("source", [plain_provider_source, google_source])
async def test_a_fetched_token_the_server_echoes_is_hidden_from_the_error_and_telemetry(
    source: Source,
) -> None:
    gate, peer = Gate(), Peer(status=401)
    gate.open()
    adapter, model = source(gate, peer)
    token = f"{'ya29.fresh' if source is google_source else 'token'}-1-{TOKEN_TAIL}"
    sink = ListSink()
    adapter.telemetry = sink
    with pytest.raises(AuthError) as caught:
        await adapter.complete(ask(model))
    assert peer.requests[0].headers["authorization"] == f"Bearer {token}"
    (failed,) = [event for event in sink.events if isinstance(event, CallFailed)]
    shown = [str(caught.value), json.dumps(caught.value.describe()), failed.error_message]
    assert all("Access denied" in text and token not in text for text in shown)


async def _stray_cancel() -> str:
    """A token provider awaiting a task that something else cancels: its CancelledError is
    the provider's, not the call's (no one cancelled the call)."""
    import asyncio

    awaited = asyncio.ensure_future(asyncio.sleep(SAFETY_SECONDS))
    await asyncio.sleep(0)
    awaited.cancel()
    return await awaited  # type: ignore[no-any-return]


def _stray_cancel_in_a_thread() -> str:
    import asyncio

    raise asyncio.CancelledError


@pytest.mark.anyio
@pytest.mark.parametrize(
    "provider",
    [
        pytest.param(_stray_cancel, id="async", marks=pytest.mark.backend_independent),
        pytest.param(_stray_cancel_in_a_thread, id="blocking"),
    ],
)
async def test_a_token_provider_raising_a_cancelled_error_no_one_asked_for_is_an_auth_error(
    provider: Any,
) -> None:
    """It ended the call with a bare asyncio CancelledError (its caller's task not cancelled),
    which the caller takes for its own cancellation; and the next call fetches again."""
    peer = Peer()
    adapter = azure(peer, provider)
    for _ in range(2):
        with pytest.raises(AuthError, match="provider failed: CancelledError") as caught:
            await adapter.complete(ask())
        assert type(caught.value.__cause__).__name__ == "_NoToken"
        assert type(caught.value.__cause__.__cause__).__name__ == "CancelledError"
    assert peer.requests == []
    await adapter.aclose()


@pytest.mark.anyio
async def test_google_credentials_whose_expiry_has_a_time_zone_are_an_auth_error() -> None:
    """google-auth compares ``expiry`` with its naive UTC clock: ``valid`` raised a bare
    TypeError (offset-naive and offset-aware) from the settings' check and the stage's."""
    aware = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    peer = Peer()
    adapter = vertex(peer, Credentials(token="ya29.aware", expiry=aware))
    with pytest.raises(AuthError, match="offset-naive and offset-aware") as caught:
        await adapter.complete(ask("vertex:gemini-2.5-flash"))
    assert isinstance(caught.value.__cause__, TypeError) and peer.requests == []
    fixed = vertex(peer, Credentials(token="ya29.naive", expiry=in_an_hour()))
    assert (await fixed.complete(ask("vertex:gemini-2.5-flash"))).text
