"""aws_endpoint: the AWS request's URL: its region filled in, its model id escaped.

A stack's base URL may hold ``{region}`` (``https://bedrock-runtime.{region}.amazonaws.com``):
the region comes from the adapter's ``region`` setting, AWS_REGION, AWS_DEFAULT_REGION or the
``region`` of the AWS profile (the ``profile`` setting or AWS_PROFILE, read with botocore when it is
installed), and a missing one is a NotConfiguredError naming what to set, before anything is
sent. The model id in the path is percent-encoded whole, as the AWS SDKs send it
(``us.amazon.nova-micro-v1:0`` -> ``us.amazon.nova-micro-v1%3A0``; an ARN's ``/`` too), so
the path that is sent is the one that is signed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import quote

import anyio.to_thread
from pydantic import BaseModel, ConfigDict

from metis.core.url_segment import segment
from metis.errors import ConfigError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import AsyncRequestStage
from metis.stages.auth import aws as aws_auth

T = TypeVar("T")


class AwsEndpoint(AsyncRequestStage[WireRequest]):
    name = "aws_endpoint"
    role = "auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    _options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._options = services.settings.as_mapping()

    async def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        url = request.url
        if "{region}" in url:
            url = url.replace("{region}", await region_or_fail(call, self._options))
        model = call.wire_model
        url = url.replace(f"/{segment(model)}/", f"/{quote(model, safe='')}/", 1)
        return request if url == request.url else dataclasses.replace(request, url=url)


def profile_of(options: Mapping[str, Any]) -> str | None:
    """The AWS profile the adapter's settings name, if any."""
    profile = options.get("profile")
    return profile if isinstance(profile, str) and profile else None


async def region_or_fail(call: Call, options: Mapping[str, Any], session: Any | None = None) -> str:
    """The call's AWS region (from the adapter's settings, the environment or the AWS
    profile), or a NotConfiguredError saying where to set one; a ConfigError for a value that
    is not a region's name, before anything is sent to the host it would make."""
    try:
        found = aws_auth.region(options) or await _profile_region(call, options, session)
    except ConfigError as exc:  # a value that is not a region's name
        raise ConfigError(f"{call.provider}: {exc}") from None
    if found is None:
        raise not_configured(
            call,
            "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), give the adapter "
            "settings={'region': ...}, or set region in your AWS profile",
            "AWS_REGION",
        )
    return found


async def _profile_region(
    call: Call, options: Mapping[str, Any], session: Any | None
) -> str | None:
    try:
        if session is None:
            session = aws_auth.botocore_session(profile_of(options))
        found = await in_worker(call, aws_auth.profile_region, session)
    except ConfigError:
        return None  # no botocore, or no usable profile: region_or_fail says what to do
    return None if found is None else aws_auth.checked_region(found, "the AWS profile's region")


async def in_worker(call: Call, blocking: Callable[..., T], *args: Any) -> T:
    """Run botocore's blocking configuration and credential lookups in a worker thread, as
    a wait that ``adapter.cancel()`` and the call's deadline both cut short."""
    with call.cancel.guard(call.deadline):
        return await anyio.to_thread.run_sync(blocking, *args, abandon_on_cancel=True)
    raise NetworkError(  # reached only when the deadline cancelled the scope
        f"{call.provider}: looking up AWS configuration outlived the call's deadline",
        provider=call.provider,
        request_id=call.request_id,
    )


def not_configured(call: Call, why: str, variable: str) -> ConfigError:
    from metis.errors import NotConfiguredError

    return NotConfiguredError(
        f"{call.provider}: {why}", model=call.model, adapter=call.provider, api_key_env=variable
    )
