"""google_auth: a Google OAuth access token on every request (Vertex AI), from Application
Default Credentials.

A ready access token (``AdapterConfig.api_key``, or ``GOOGLE_OAUTH_ACCESS_TOKEN``, as from
``gcloud auth print-access-token``) is sent as it is and never refreshed. Otherwise the
credentials are ``AdapterConfig.options["google_credentials"]`` when given (any
``google.auth.credentials.Credentials``), else what ``google.auth.default()`` finds: the file
``GOOGLE_APPLICATION_CREDENTIALS`` names, ``gcloud auth application-default login``'s, or the
metadata server's on Google Cloud. The token is cached until it expires (google-auth keeps it
on the credentials object); finding and refreshing credentials can touch files and the
network, so both run in a worker thread (``anyio.to_thread``), never on the event loop.

Needs the optional extra ``metis[vertex]`` (google-auth). Credentials that cannot be found raise
NotConfiguredError naming what to set; a refresh the token service refuses (an expired or
revoked credential) is an AuthError, which is not retried.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from metis.errors import AuthError, ConfigError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
HOW_TO_CONFIGURE = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run `gcloud auth "
    "application-default login`, or pass AdapterConfig(options={'google_credentials': ...})"
)


class GoogleAuth(Stage[WireRequest, WireRequest, Any, Any]):
    name = "google_auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        scopes: list[str] = Field(default_factory=lambda: [CLOUD_PLATFORM])

    options: Options
    _api_key: str | None = None
    _options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._api_key = services.require_endpoint(self.name).api_key
        self._options = services.config.options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Shared by every call of this adapter, on purpose: one credential, one cached token.
        self._default: Any = None
        self._lock = threading.Lock()

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> AsyncIterator[Any]:
        ready = self._api_key  # an access token given as it is (not refreshed)
        if ready:
            headers = {**request.headers, "authorization": f"Bearer {ready}"}
            async for item in inner(dataclasses.replace(request, headers=headers), call):
                yield item
            return
        credentials = self._options.get("google_credentials") or self._default
        if credentials is not None and not all(
            hasattr(credentials, name) for name in ("valid", "token", "refresh")
        ):
            raise ConfigError(
                f"{call.provider}: options['google_credentials'] must be google-auth "
                f"credentials (google.auth.credentials.Credentials), got {type(credentials)!r}"
            )
        if credentials is None or not credentials.valid:
            token = await anyio.to_thread.run_sync(self._fresh_token, call, credentials)
        else:
            token = credentials.token
        headers = {**request.headers, "authorization": f"Bearer {token}"}
        async for item in inner(dataclasses.replace(request, headers=headers), call):
            yield item

    def _fresh_token(self, call: Call, credentials: Any) -> str:
        """In a worker thread: find the default credentials if need be, refresh if expired."""
        auth = _google_auth(call)
        with self._lock:
            try:
                if credentials is None:
                    credentials = self._default
                if credentials is None:
                    credentials, _project = auth.default(scopes=self.options.scopes)
                    self._default = credentials
                if not credentials.valid:
                    from google.auth.transport.requests import Request

                    credentials.refresh(Request())
            except auth.exceptions.DefaultCredentialsError as exc:
                raise _not_configured(call, f"no Google credentials found ({exc})") from None
            except auth.exceptions.RefreshError as exc:
                if exc.retryable:  # the token service failed, not the credential
                    raise NetworkError(
                        f"{call.provider}: the Google token service failed: {exc}",
                        provider=call.provider,
                        request_id=call.request_id,
                    ) from None
                raise AuthError(
                    f"{call.provider}: the Google credentials could not be refreshed (expired or "
                    f"revoked?): {exc}",
                    provider=call.provider,
                    request_id=call.request_id,
                ) from None
            except auth.exceptions.TransportError as exc:
                raise NetworkError(
                    f"{call.provider}: refreshing the Google access token failed: {exc}",
                    provider=call.provider,
                    request_id=call.request_id,
                ) from None
            token = credentials.token
        if not isinstance(token, str) or not token:
            raise AuthError(
                f"{call.provider}: the Google credentials gave no access token",
                provider=call.provider,
                request_id=call.request_id,
            )
        return token


def _google_auth(call: Call) -> Any:
    try:
        import google.auth
        import google.auth.exceptions
    except ImportError:
        raise _not_configured(
            call, "google-auth is not installed: pip install 'metis[vertex]'"
        ) from None
    return google.auth


def _not_configured(call: Call, reason: str) -> ConfigError:
    from metis.errors import NotConfiguredError

    return NotConfiguredError(
        f"{call.provider}: {reason}; {HOW_TO_CONFIGURE}",
        model=call.model,
        adapter=call.provider,
        api_key_env="GOOGLE_APPLICATION_CREDENTIALS",
    )
