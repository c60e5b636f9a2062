"""azure_auth: a Microsoft Entra ID bearer token for Azure OpenAI, when there is no API key.

With an API key (``AZURE_OPENAI_API_KEY`` or ``AdapterConfig.api_key``) the request already
carries the ``api-key`` header and this stage adds nothing. Without one it sends
``Authorization: Bearer <token>`` for the Cognitive Services scope, the token coming from
the adapter's ``token_provider`` setting when given (a callable returning the token,
plain or async, like azure-identity's ``get_bearer_token_provider(...)``), else from
azure-identity's ``DefaultAzureCredential`` (environment, workload or managed identity, Azure
CLI login), cached until five minutes before it expires. Getting a token can touch files and
the network, so a plain callable and the credential run in a worker thread; however many calls
need a token at once, one fetch serves them all, and each waits within its own deadline and
cancel (metis/stages/auth/token_cache.py).

Needs the optional extra ``metis[azure]`` (azure-identity) unless a token provider is given.
No key and no identity raise NotConfiguredError naming what to set; an identity the token
service refuses, or a token provider that fails, is an AuthError (not retried), an unreachable
token service a NetworkError; the provider's exception is chained as the cause.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.errors import AuthError, ConfigError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import AsyncRequestStage, Inner
from metis.stages.auth.token_cache import (
    AsyncFetch,
    BlockingFetch,
    Token,
    TokenCache,
    bearer_of,
    is_async_callable,
    printable,
    refused_forgotten,
)

COGNITIVE_SERVICES = "https://cognitiveservices.azure.com/.default"
REFRESH_MARGIN_SECONDS = 300.0
SECRET_ENV = ("AZURE_CLIENT_SECRET", "AZURE_PASSWORD", "AZURE_CLIENT_CERTIFICATE_PASSWORD")
"""azure-identity's environment secrets: hidden from errors, which may quote them."""


class AzureAuth(AsyncRequestStage[WireRequest]):
    name = "azure_auth"
    role = "auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        scope: str = COGNITIVE_SERVICES

    options: Options
    _api_key: str | None = None
    _options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._api_key = services.require_endpoint(self.name).api_key
        self._options = services.settings.as_mapping()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Shared by every call of this adapter, on purpose: one identity, one cached token.
        self._credential: Any = None
        self._credential_lock = threading.Lock()
        self._claims: str | None = None  # a challenge's, for the next token only
        self._identity = TokenCache(
            "Entra ID",
            classify=_identity_error,
            refresh_margin=REFRESH_MARGIN_SECONDS,
            secrets=_environment_secrets,
        )
        # A provider says nothing of expiry (and caches itself): its fetches are only shared.
        self._provided = TokenCache(
            "the Entra ID token provider", classify=_classified, secrets=_environment_secrets
        )

    def __call__(self, request: WireRequest, call: Call, inner: Inner[WireRequest, Any]) -> Any:
        return refused_forgotten(self.rewrite, request, call, inner, self.refused, self.challenged)

    def refused(self, request: WireRequest) -> None:
        """``request`` was answered 401: the Entra ID token it carried is not kept."""
        token = bearer_of(request)
        if token is not None:
            self._identity.forget(token)

    def challenged(self, error: AuthError) -> bool:
        """A 401 asked for a token carrying ``error.claims`` (Continuous Access Evaluation: a
        session revoked, a policy changed): the identity's next token is asked for with them,
        once, as azure-identity's own cached one would be refused until it expires. False for
        a token provider of the application's, which takes no claims."""
        if self._api_key or error.claims is None or self._options.get("token_provider"):
            return False
        with self._credential_lock:
            self._claims = error.claims
        return True

    async def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        if self._api_key:
            return request
        token = await self._bearer(call)
        headers = {**request.headers, "authorization": f"Bearer {token}"}
        return dataclasses.replace(request, headers=headers)

    async def _bearer(self, call: Call) -> str:
        provider = self._options.get("token_provider")
        if provider is None:
            return await self._identity.token(call, self._identity_token)
        if not callable(provider):
            raise ConfigError(
                f"{call.provider}: the token_provider setting must be a callable that "
                f"returns a token, got {type(provider)!r}"
            )
        return await self._provided.token(call, _from_provider(provider))

    def _identity_token(self) -> Token:
        """In a worker thread: a token from DefaultAzureCredential."""
        from azure.identity import DefaultAzureCredential

        with self._credential_lock:
            if self._credential is None:
                self._credential = DefaultAzureCredential()
            claims, self._claims = self._claims, None
        if claims is None:
            access = self._credential.get_token(self.options.scope)
        else:
            access = self._credential.get_token(self.options.scope, claims=claims)
        return Token(access.token, float(access.expires_on))


def _from_provider(provider: Any) -> BlockingFetch | AsyncFetch:
    if is_async_callable(provider):

        async def fetch_async() -> Token:
            return Token(await provider())

        return fetch_async

    def fetch() -> Token:
        return Token(provider())

    return fetch


def _identity_error(exc: Exception, call: Call) -> BaseException | None:
    if isinstance(exc, ImportError):
        return _not_configured(call, "azure-identity is not installed (pip install 'metis[azure]')")
    return _classified(exc, call)


def _classified(exc: Exception, call: Call) -> BaseException | None:
    """The error for what azure-identity raised (None: the cache's AuthError)."""
    try:
        from azure.core.exceptions import (
            ClientAuthenticationError,
            ServiceRequestError,
            ServiceResponseError,
        )
        from azure.identity import CredentialUnavailableError
    except ImportError:  # a token provider of the application's, without azure-identity
        return None
    details: dict[str, Any] = {"provider": call.provider, "request_id": call.request_id}
    if isinstance(exc, CredentialUnavailableError):
        return _not_configured(call, f"no Entra ID identity is available ({printable(exc)})")
    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return NetworkError(
            f"{call.provider}: reaching Entra ID failed: {printable(exc)}", **details
        )
    if isinstance(exc, ClientAuthenticationError):
        message = f"{call.provider}: Entra ID refused the identity: {printable(exc)}"
        return AuthError(message, **details)
    return None


def _environment_secrets() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in SECRET_ENV)


def _not_configured(call: Call, reason: str) -> ConfigError:
    from metis.errors import NotConfiguredError

    return NotConfiguredError(
        f"{call.provider} has no API key and {reason}: set AZURE_OPENAI_API_KEY (or "
        "AdapterConfig.api_key), or sign in for Entra ID (`az login`, a managed identity, or "
        "AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_CLIENT_SECRET), or pass "
        "settings={'token_provider': ...}",
        model=call.model,
        adapter=call.provider,
        api_key_env="AZURE_OPENAI_API_KEY",
    )
