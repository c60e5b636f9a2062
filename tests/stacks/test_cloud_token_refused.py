"""A cloud token the server refuses (401) is not sent again: the Entra ID token metis caches
(azure-identity's DefaultAzureCredential) and the Google credentials' token are dropped, so
the next call fetches another instead of failing with the refused one until it expires. The
refused call itself is not sent again (an AuthError, sent once)."""

from __future__ import annotations

import importlib.util
from typing import Any

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
