"""aws_sigv4: authenticate an AWS request, with a Bedrock API key or a SigV4 signature.

A request that already carries ``authorization`` (the stack's bearer key, a Bedrock API key
from AWS_BEARER_TOKEN_BEDROCK or the adapter's ``api_key``) goes as it is. Otherwise it is
signed with AWS Signature Version 4 by botocore, with credentials from the standard chain
(metis/stages/auth/aws.py) for the profile in the adapter's ``profile`` setting or
AWS_PROFILE. No credentials at all is a NotConfiguredError naming what to set, raised before
anything is sent. The stage sits inside ``retry``, so every attempt is signed afresh, and
outside ``normalize``, so a configuration error reaches the caller as itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.errors import AdapterError, AuthError, ConfigError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import AsyncRequestStage
from metis.stages.auth import aws as aws_auth
from metis.stages.auth.aws_endpoint import in_worker, not_configured, profile_of, region_or_fail
from metis.stages.auth.token_cache import printable

BEARER_ENV = "AWS_BEARER_TOKEN_BEDROCK"


class AwsSigV4(AsyncRequestStage[WireRequest]):
    name = "aws_sigv4"
    role = "auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        service: str = "bedrock"

    options: Options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # botocore sessions by profile: a cache of resolved configuration, shared by calls.
        self._sessions: dict[str | None, Any] = {}
        self._options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._options = services.settings.as_mapping()

    async def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        if any(name.lower() == "authorization" for name in request.headers):
            return request
        return await self._signed(request.serialized(), call)

    async def _signed(self, request: WireRequest, call: Call) -> WireRequest:
        try:
            session = self._session(profile_of(self._options))
            credentials = await in_worker(call, aws_auth.frozen_credentials, session)
        except ConfigError as exc:
            why = f"{exc}; or set {BEARER_ENV} to a Bedrock API key"
            raise not_configured(call, why, BEARER_ENV) from None
        except aws_auth.CredentialsUnreachable as exc:
            raise NetworkError(f"{call.provider}: {exc}", **_of(call)) from None
        except AdapterError:  # the deadline, while the chain was asked
            raise
        except Exception as exc:  # a credential provider's own failure (a refresh's KeyError)
            said = f"{call.provider}: getting AWS credentials failed: {printable(exc)}"
            raise AuthError(said, **_of(call)) from exc
        if credentials is None:
            raise not_configured(
                call,
                f"no AWS credentials: set {BEARER_ENV} to a Bedrock API key, or "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN for "
                "temporary ones), or AWS_PROFILE to a profile of ~/.aws/credentials",
                BEARER_ENV,
            )
        call.add_secret(*aws_auth.secret_parts(credentials))  # a server may echo them back
        region = await region_or_fail(call, self._options, session)
        try:
            headers = aws_auth.sign(
                request.method,
                request.url,
                request.headers,
                request.content or b"",  # the bytes the transport sends
                credentials,
                region,
                self.options.service,
            )
        except UnicodeError:  # a key read from bytes that are not UTF-8 (a lone surrogate)
            said = f"{call.provider}: the AWS credentials are not text SigV4 can sign (UTF-8)"
            raise AuthError(said, **_of(call)) from None
        return dataclasses.replace(request, headers=headers)

    def _session(self, profile: str | None) -> Any:
        session = self._sessions.get(profile)
        if session is None:
            session = self._sessions[profile] = aws_auth.botocore_session(profile)
        return session


def _of(call: Call) -> dict[str, Any]:
    return {"provider": call.provider, "request_id": call.request_id}
