"""google_auth: a Google OAuth access token on every request (Vertex AI), from Application
Default Credentials.

A ready access token (``AdapterConfig.api_key``, or ``GOOGLE_OAUTH_ACCESS_TOKEN``, as from
``gcloud auth print-access-token``) is sent as it is and never refreshed. Otherwise the
credentials are the adapter's ``credentials`` setting when given (any
``google.auth.credentials.Credentials``), else what ``google.auth.default()`` finds: the file
``GOOGLE_APPLICATION_CREDENTIALS`` names, ``gcloud auth application-default login``'s, or the
metadata server's on Google Cloud. The token is cached until it expires (google-auth keeps it
on the credentials object); finding and refreshing credentials can touch files and the
network, so both run in a worker thread (``anyio.to_thread``), never on the event loop. However
many calls find the token expired at once, one refresh serves them all, and each waits within
its own deadline and cancel (metis/stages/auth/token_cache.py).

Needs the optional extra ``metis[vertex]`` (google-auth). Credentials that cannot be found raise
NotConfiguredError naming what to set; a refresh the token service refuses (an expired or
revoked credential), or any other failure of the credentials, is an AuthError (not retried), a
token service that fails a NetworkError; google-auth's exception is chained as the cause.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.errors import AuthError, ConfigError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.settings import google_credentials_like
from metis.pipeline.stage import AsyncRequestStage, Inner
from metis.stages.auth.token_cache import (
    Token,
    TokenCache,
    bearer_of,
    printable,
    refused_forgotten,
)

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
HOW_TO_CONFIGURE = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run `gcloud auth "
    "application-default login`, or pass settings={'credentials': ...}"
)


class GoogleAuth(AsyncRequestStage[WireRequest]):
    name = "google_auth"
    role = "auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        scopes: list[str] = Field(default_factory=lambda: [CLOUD_PLATFORM])

    options: Options
    _api_key: str | None = None
    _options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._api_key = services.require_endpoint(self.name).api_key
        self._options = services.settings.as_mapping()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Shared by every call of this adapter, on purpose: one credential, one cached token.
        self._default: Any = None
        self._default_lock = threading.Lock()
        # The credentials keep the token and its expiry: the cache only shares each refresh.
        self._refreshes = TokenCache("the Google credentials", classify=_classified)
        self._stale: str | None = None
        """The last token a server refused (401): refreshed before it is sent again."""

    def __call__(self, request: WireRequest, call: Call, inner: Inner[WireRequest, Any]) -> Any:
        return refused_forgotten(self.rewrite, request, call, inner, self.refused)

    def refused(self, request: WireRequest) -> None:
        """``request`` was answered 401: its token is refreshed before it is sent again."""
        self._stale = bearer_of(request) or self._stale

    async def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        ready = self._api_key  # an access token given as it is (not refreshed)
        if ready:
            headers = {**request.headers, "authorization": f"Bearer {ready}"}
            return dataclasses.replace(request, headers=headers)
        credentials = self._credentials(call)
        if credentials is None or not _valid(credentials) or credentials.token == self._stale:
            token = await self._refreshes.token(call, self._fresh_token)
        else:
            token = credentials.token
            call.add_secret(token)
        headers = {**request.headers, "authorization": f"Bearer {token}"}
        return dataclasses.replace(request, headers=headers)

    def _credentials(self, call: Call) -> Any:
        """The credentials given in the settings, or the defaults found so far (or None)."""
        credentials = self._options.get("credentials") or self._default
        if credentials is not None and not google_credentials_like(credentials):
            raise ConfigError(
                f"{call.provider}: the credentials setting must be google-auth "
                f"credentials (google.auth.credentials.Credentials), got {type(credentials)!r}"
            )
        return credentials

    def _fresh_token(self) -> Token:
        """In a worker thread: find the default credentials if need be, refresh if expired."""
        import google.auth
        from google.auth.transport.requests import Request

        credentials = self._options.get("credentials")
        if credentials is None:
            with self._default_lock:
                if self._default is None:
                    self._default, _project = google.auth.default(scopes=self.options.scopes)
                credentials = self._default
        if not credentials.valid or credentials.token == self._stale:
            credentials.refresh(Request())
        return Token(credentials.token)


def _valid(credentials: Any) -> bool:
    """Whether ``credentials`` hold a token good now; False when they cannot say (their check
    raising: an expiry with a time zone, which google-auth compares with its naive UTC clock),
    so the refresh meets the failure and reports it (an AuthError with it as the cause)."""
    try:
        return bool(credentials.valid)
    except Exception:
        return False


def _classified(exc: Exception, call: Call) -> BaseException | None:
    """The error for what google-auth raised (None: the cache's AuthError)."""
    if isinstance(exc, ImportError):
        why = f"google-auth is not installed ({printable(exc)}): pip install 'metis[vertex]'"
        return _not_configured(call, why)
    try:
        from google.auth import exceptions
    except ImportError:
        return None
    details: dict[str, Any] = {"provider": call.provider, "request_id": call.request_id}
    if isinstance(exc, exceptions.DefaultCredentialsError):
        return _not_configured(call, f"no Google credentials found ({printable(exc)})")
    if isinstance(exc, exceptions.RefreshError) and not exc.retryable:
        return AuthError(
            f"{call.provider}: the Google credentials could not be refreshed (expired or "
            f"revoked?): {printable(exc)}",
            **details,
        )
    if isinstance(exc, exceptions.RefreshError):  # the token service failed, not the credential
        message = f"{call.provider}: the Google token service failed: {printable(exc)}"
        return NetworkError(message, **details)
    if isinstance(exc, exceptions.TransportError):
        message = f"{call.provider}: refreshing the Google access token failed: {printable(exc)}"
        return NetworkError(message, **details)
    return None


def _not_configured(call: Call, reason: str) -> ConfigError:
    from metis.errors import NotConfiguredError

    return NotConfiguredError(
        f"{call.provider}: {reason}; {HOW_TO_CONFIGURE}",
        model=call.model,
        adapter=call.provider,
        api_key_env="GOOGLE_APPLICATION_CREDENTIALS",
    )
