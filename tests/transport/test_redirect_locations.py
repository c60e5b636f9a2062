"""A redirect whose Location is not a URL, answered to the gateway's upstream client (the
lean transport, requests sent directly) or to the adapter's own default client: a
RedirectError, which no retry repeats, never httpx's InvalidURL from inside nor a retried
NetworkError (httpx's send reads the Location itself, as a RemoteProtocolError)."""

from __future__ import annotations

import asyncio

import pytest

import metis
from metis.errors import RedirectError
from metis.gateway.upstream_pool import upstream_client

from ..fault_proxy import FaultProxy, response

pytest.importorskip("httptools")


@pytest.mark.parametrize("lean", [True, False], ids=["upstream-client", "default-client"])
@pytest.mark.parametrize("location", ["::not a url::", "http://[::1", "/fine/path"])
def test_a_redirect_to_a_location_that_is_not_a_url_is_a_redirect_error(
    location: str, lean: bool
) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy:
            proxy.script(response(307, b"", {"location": location}))
            client = upstream_client(30.0) if lean else None
            adapter = metis.build_adapter(
                "anthropic", api_key="k", base_url=proxy.url, max_retries=2, http_client=client
            )
            request = metis.CanonicalRequest(
                model="claude-sonnet-4-5",
                messages=[metis.Message(role="user", content="Hi")],
                max_output_tokens=10,
            )
            try:
                with pytest.raises(RedirectError) as caught:
                    await adapter.complete(request)
            finally:
                await adapter.aclose()
                if client is not None:
                    await client.aclose()
            assert caught.value.provider_status in (307, None)  # httpx's send hides it
            assert len(proxy.requests) == 1  # not retried

    asyncio.run(main())
