"""azure_auth: a Microsoft Entra ID bearer token for Azure OpenAI, when there is no API key.

With an API key (``AZURE_OPENAI_API_KEY`` or ``AdapterConfig.api_key``) the request already
carries the ``api-key`` header and this stage adds nothing. Without one it sends
``Authorization: Bearer <token>`` for the Cognitive Services scope, the token coming from
``AdapterConfig.options["azure_ad_token_provider"]`` when given (a callable returning the token,
plain or async, like azure-identity's ``get_bearer_token_provider(...)``), else from
azure-identity's ``DefaultAzureCredential`` (environment, workload or managed identity, Azure
CLI login), cached until five minutes before it expires. Getting a token can touch files and
the network, so a plain callable and the credential run in a worker thread.

Needs the optional extra ``metis[azure]`` (azure-identity) unless a token provider is given.
No key and no identity raise NotConfiguredError naming what to set; an identity the token
service refuses is an AuthError, which is not retried.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict

from metis.errors import AuthError, ConfigError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage

COGNITIVE_SERVICES = "https://cognitiveservices.azure.com/.default"
REFRESH_MARGIN_SECONDS = 300.0


class AzureAuth(Stage[WireRequest, WireRequest, Any, Any]):
    name = "azure_auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        scope: str = COGNITIVE_SERVICES

    options: Options
    _api_key: str | None = None
    _options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._api_key = services.require_endpoint(self.name).api_key
        self._options = services.config.options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Shared by every call of this adapter, on purpose: one identity, one cached token.
        self._credential: Any = None
        self._token: tuple[str, float] | None = None
        self._lock = threading.Lock()

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> AsyncIterator[Any]:
        if not self._api_key:
            token = await self._bearer(call)
            headers = {**request.headers, "authorization": f"Bearer {token}"}
            request = dataclasses.replace(request, headers=headers)
        async for item in inner(request, call):
            yield item

    async def _bearer(self, call: Call) -> str:
        provider = self._options.get("azure_ad_token_provider")
        if provider is not None and not callable(provider):
            raise ConfigError(
                f"{call.provider}: options['azure_ad_token_provider'] must be a callable that "
                f"returns a token, got {type(provider)!r}"
            )
        if provider is not None:
            if _is_async(provider):
                token = await provider()
            else:
                token = await anyio.to_thread.run_sync(provider)
        else:
            cached = self._token
            if cached is not None and time.time() < cached[1] - REFRESH_MARGIN_SECONDS:
                return cached[0]
            token = await anyio.to_thread.run_sync(self._identity_token, call)
        if not isinstance(token, str) or not token:
            raise AuthError(
                f"{call.provider}: the Entra ID token provider gave no token",
                provider=call.provider,
                request_id=call.request_id,
            )
        return token

    def _identity_token(self, call: Call) -> str:
        """In a worker thread: a token from DefaultAzureCredential, cached until near expiry."""
        try:
            from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError
            from azure.identity import CredentialUnavailableError, DefaultAzureCredential
        except ImportError:
            raise _not_configured(
                call, "azure-identity is not installed (pip install 'metis[azure]')"
            ) from None
        with self._lock:
            try:
                if self._credential is None:
                    self._credential = DefaultAzureCredential()
                access = self._credential.get_token(self.options.scope)
            except CredentialUnavailableError as exc:
                raise _not_configured(call, f"no Entra ID identity is available ({exc})") from None
            except ServiceRequestError as exc:
                raise NetworkError(
                    f"{call.provider}: reaching Entra ID failed: {exc}",
                    provider=call.provider,
                    request_id=call.request_id,
                ) from None
            except ClientAuthenticationError as exc:
                raise AuthError(
                    f"{call.provider}: Entra ID refused the identity: {exc}",
                    provider=call.provider,
                    request_id=call.request_id,
                ) from None
            self._token = (access.token, float(access.expires_on))
        return str(access.token)


def _is_async(provider: Any) -> bool:
    """An async function, or an object whose ``__call__`` is one."""
    call = getattr(provider, "__call__", None)  # noqa: B004 - the method itself is wanted
    return inspect.iscoroutinefunction(provider) or inspect.iscoroutinefunction(call)


def _not_configured(call: Call, reason: str) -> ConfigError:
    from metis.errors import NotConfiguredError

    return NotConfiguredError(
        f"{call.provider} has no API key and {reason}: set AZURE_OPENAI_API_KEY (or "
        "AdapterConfig.api_key), or sign in for Entra ID (`az login`, a managed identity, or "
        "AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_CLIENT_SECRET), or pass "
        "AdapterConfig(options={'azure_ad_token_provider': ...})",
        model=call.model,
        adapter=call.provider,
        api_key_env="AZURE_OPENAI_API_KEY",
    )
