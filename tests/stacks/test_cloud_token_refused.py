"""A cloud token the server refuses (401) is not sent again: the Entra ID token metis caches
(azure-identity's DefaultAzureCredential) and the Google credentials' token are dropped, so
the next call fetches another instead of failing with the refused one until it expires. The
refused call itself is not sent again (an AuthError, sent once)."""

from __future__ import annotations

import base64
import importlib.util
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, AuthError, build_adapter
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator

from . import test_azure, test_vertex

pytestmark = pytest.mark.anyio


class RevokedFirst(test_azure.FakeCredential):
    """Entra ID's first token is one the server has since revoked."""

    def get_token(self, *scopes: str) -> Any:
        token = super().get_token(*scopes)
        return type(token)("revoked" if token.token == "token-1" else "token-ok", token.expires_on)


@pytest.mark.skipif(importlib.util.find_spec("azure.identity") is None, reason="metis[azure]")
async def test_an_entra_token_the_server_refuses_is_fetched_again_for_the_next_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import azure.identity

    RevokedFirst.instances, RevokedFirst.error = [], None
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", RevokedFirst)
    with Emulator(api_keys=["token-ok"]) as emulator:
        config = AdapterConfig(
            base_url=emulator.base_url("azure"), api_key=None, settings={"resource": "r"}
        )
        adapter = build_adapter("azure", config, tool_id_store=InMemoryToolIdStore())
        with pytest.raises(AuthError) as caught:
            await adapter.complete(test_azure.ask())
        assert caught.value.provider_status == 401 and emulator.stats.requests == 1
        reply = await adapter.complete(test_azure.ask())
        assert reply.text and emulator.stats.requests == 2
        await adapter.aclose()


class RevokedCredentials(test_vertex.Credentials):  # type: ignore[misc]
    """Google credentials holding a token the server has revoked; a refresh mints a good one."""

    def refresh(self, request: Any) -> None:
        self.token = "ya29.good"
        self.expiry = test_vertex.valid_credentials().expiry


async def test_a_google_token_the_server_refuses_is_refreshed_for_the_next_call() -> None:
    with Emulator(api_keys=["ya29.good"]) as emulator:
        credentials = RevokedCredentials(
            token="ya29.revoked", expiry=test_vertex.valid_credentials().expiry
        )
        config = AdapterConfig(
            base_url=emulator.base_url("vertex"),
            settings={"project": "p", "location": "global", "google_credentials": credentials},
        )
        adapter = build_adapter("vertex", config)
        with pytest.raises(AuthError) as caught:
            await adapter.complete(test_vertex.ask())
        assert caught.value.provider_status == 401 and emulator.stats.requests == 1
        reply = await adapter.complete(test_vertex.ask())
        assert reply.text and emulator.stats.requests == 2
        await adapter.aclose()


async def test_an_embedding_call_refused_a_google_token_refreshes_it_for_the_next() -> None:
    """Embeddings (and batches, token counts) go through Provider.fetch, not the pipeline."""
    from metis.adapter.embedder import build_embedder

    with Emulator(api_keys=["ya29.good"]) as emulator:
        credentials = RevokedCredentials(
            token="ya29.revoked", expiry=test_vertex.valid_credentials().expiry
        )
        embedder = build_embedder(
            "vertex",
            base_url=emulator.base_url("vertex"),
            settings={"project": "p", "location": "us-central1", "credentials": credentials},
            max_retries=0,
        )
        with pytest.raises(AuthError) as caught:
            await embedder.embed(["a text"], model="text-embedding-005")
        assert caught.value.provider_status == 401
        result = await embedder.embed(["a text"], model="text-embedding-005")
        assert len(result) == 1
        await embedder.aclose()


CLAIMS = '{"access_token":{"nbf":{"essential":true,"value":"1726077595"}}}'
CHALLENGE = (
    'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/'
    'authorize", error="insufficient_claims", claims="'
    + base64.urlsafe_b64encode(CLAIMS.encode()).decode().rstrip("=")
    + '"'
)
REVOKED = {"error": {"code": "401", "message": "Token revoked (Continuous Access Evaluation)."}}


class CaeCredential(test_azure.FakeCredential):
    """azure-identity's: its token cached until it expires; a token asked with claims new."""

    asked: list[str | None] = []

    def get_token(self, *scopes: str, **options: Any) -> Any:
        self.asked.append(options.get("claims"))
        token = super().get_token(*scopes)
        return type(token)("fresh" if options else "revoked", token.expires_on)


class Revoking(test_azure.Peer):
    """Azure OpenAI under Continuous Access Evaluation: a token revoked by an event (a session
    ended, a policy changed) is answered 401 with a claims challenge."""

    def __init__(
        self, refused: tuple[str, ...] = ("Bearer revoked",), reply: dict[str, Any] | None = None
    ) -> None:
        super().__init__(reply)
        self.refused = refused

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.headers["authorization"] in self.refused:
            self.requests.append(request)
            return httpx.Response(401, json=REVOKED, headers={"www-authenticate": CHALLENGE})
        return super().__call__(request)


@pytest.fixture
def cae_identity(monkeypatch: pytest.MonkeyPatch) -> type[CaeCredential]:
    import azure.identity

    CaeCredential.instances, CaeCredential.error, CaeCredential.asked = [], None, []
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", CaeCredential)
    return CaeCredential


@pytest.mark.skipif(importlib.util.find_spec("azure.identity") is None, reason="metis[azure]")
@pytest.mark.parametrize("stream", [False, True])
async def test_a_claims_challenge_asks_entra_for_a_token_with_the_claims_once(
    cae_identity: type[CaeCredential], stream: bool
) -> None:
    """The refused call is signed again with a token carrying the claims and sent once more,
    as azure-core's policy does; the claims are asked for once, and later calls keep the new
    token, where the credential's cached one would be refused until it expired."""
    peer = Revoking()
    adapter = test_azure.azure("azure", peer, api_key=None)
    request = test_azure.ask().model_copy(update={"stream": stream})
    reply = await adapter.complete(request)
    again = await adapter.complete(request)
    assert reply.text and again.text
    assert [r.headers["authorization"] for r in peer.requests] == [
        "Bearer revoked",
        "Bearer fresh",
        "Bearer fresh",
    ]
    assert cae_identity.asked == [None, CLAIMS]
    await adapter.aclose()


@pytest.mark.skipif(importlib.util.find_spec("azure.identity") is None, reason="metis[azure]")
async def test_a_token_with_the_claims_refused_again_is_an_auth_error_sent_twice(
    cae_identity: type[CaeCredential],
) -> None:
    peer = Revoking(refused=("Bearer revoked", "Bearer fresh"))
    adapter = test_azure.azure("azure", peer, api_key=None)
    with pytest.raises(AuthError) as caught:
        await adapter.complete(test_azure.ask())
    assert caught.value.claims == CLAIMS and len(peer.requests) == 2
    assert cae_identity.asked == [None, CLAIMS]
    with pytest.raises(AuthError):  # the refused new token is not kept either
        await adapter.complete(test_azure.ask())
    sent = [r.headers["authorization"] for r in peer.requests]
    assert sent == ["Bearer revoked", "Bearer fresh"] * 2
    await adapter.aclose()


@pytest.mark.skipif(importlib.util.find_spec("azure.identity") is None, reason="metis[azure]")
async def test_a_token_provider_takes_no_claims_so_the_challenge_is_not_sent_again() -> None:
    peer = Revoking(refused=("Bearer app-token",))
    settings = {"resource": "my-resource", "token_provider": lambda: "app-token"}
    adapter = test_azure.azure("azure", peer, api_key=None, settings=settings)
    with pytest.raises(AuthError) as caught:
        await adapter.complete(test_azure.ask())
    assert caught.value.claims == CLAIMS and len(peer.requests) == 1
    await adapter.aclose()


@pytest.mark.skipif(importlib.util.find_spec("azure.identity") is None, reason="metis[azure]")
async def test_an_embedding_call_refused_with_a_claims_challenge_gives_the_next_the_claims(
    cae_identity: type[CaeCredential],
) -> None:
    """Embeddings go through Provider.fetch, which leaves the resend to the next call."""
    from metis.adapter.embedder import build_embedder

    vectors = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }
    peer = Revoking(reply=vectors)
    embedder = build_embedder(
        "azure", http_client=peer.client(), settings={"resource": "r"}, max_retries=0
    )
    with pytest.raises(AuthError) as caught:
        await embedder.embed(["a text"], model="text-embedding-3-small")
    assert caught.value.claims == CLAIMS
    result = await embedder.embed(["a text"], model="text-embedding-3-small")
    assert len(result) == 1 and cae_identity.asked == [None, CLAIMS]
    assert [r.headers["authorization"] for r in peer.requests] == ["Bearer revoked", "Bearer fresh"]
    await embedder.aclose()
