"""aws_endpoint: the AWS request's URL: its region filled in, its model id escaped.

A stack's base URL may hold ``{region}`` (``https://bedrock-runtime.{region}.amazonaws.com``):
the region comes from the adapter's ``options.region``, AWS_REGION, AWS_DEFAULT_REGION or the
AWS profile's config, and a missing one is a NotConfiguredError naming what to set, before
anything is sent. The model id in the path is percent-encoded whole, as the AWS SDKs send it
(``us.amazon.nova-micro-v1:0`` -> ``us.amazon.nova-micro-v1%3A0``; an ARN's ``/`` too), so
the path that is sent is the one that is signed.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage
from metis.pipeline.wire import WireRequest
from metis.providers import aws_auth


class AwsEndpoint(RequestStage[WireRequest]):
    name = "aws_endpoint"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        url = request.url
        if "{region}" in url:
            url = url.replace("{region}", region_or_fail(call))
        model = call.wire_model
        url = url.replace(f"/{model}/", f"/{quote(model, safe='')}/", 1)
        return request if url == request.url else dataclasses.replace(request, url=url)


def region_or_fail(call: Call, session: object | None = None) -> str:
    found = aws_auth.region(call.config.options, session)
    if found is None:
        from metis.registry import NotConfiguredError

        raise NotConfiguredError(
            f"{call.provider}: no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), give the "
            "adapter options={'region': ...}, or set region in your AWS profile",
            model=call.model,
            adapter=call.provider,
            api_key_env="AWS_REGION",
        )
    return found
