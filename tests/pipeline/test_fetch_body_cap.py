"""The provider's side path (``Provider.fetch``: count_tokens, batches, cached contents, the
Ollama lifecycle) reads a body whole no larger than a reply is read whole on the main path:
past 64 MiB a ProtocolError, the rest of the body never read."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.adapter.count_tokens import count_tokens
from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message
from metis.wire.framing.objects import MAX_WHOLE_BODY

MIB = 1 << 20


class Padded(httpx.AsyncByteStream):
    """A valid JSON count followed by ``mib`` MiB of blanks, one MiB a chunk."""

    def __init__(self, mib: int) -> None:
        self.mib = mib
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"input_tokens": 3}'
        for _ in range(self.mib):
            self.pulled += 1
            yield b" " * MIB


def answering(body: Padded) -> Adapter:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return build_adapter(
        "anthropic", AdapterConfig(api_key="sk-test-0123456789abcdef", http_client=client)
    )


def ask() -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5", messages=[Message.user("hi")], max_output_tokens=8
    )


@pytest.mark.anyio
async def test_a_body_over_the_cap_is_a_protocol_error_read_no_further() -> None:
    body = Padded(MAX_WHOLE_BODY // MIB + 16)
    adapter = answering(body)
    try:
        with pytest.raises(ProtocolError, match="larger than 64 MiB") as raised:
            await count_tokens(adapter, ask(), estimate_on_error=False)
    finally:
        await adapter.aclose()
    assert body.pulled <= MAX_WHOLE_BODY // MIB + 1
    assert raised.value.provider == "anthropic" and raised.value.__cause__ is not raised.value


@pytest.mark.anyio
async def test_a_body_at_the_cap_is_read() -> None:
    adapter = answering(Padded(MAX_WHOLE_BODY // MIB - 1))
    try:
        counted = await count_tokens(adapter, ask(), estimate_on_error=False)
    finally:
        await adapter.aclose()
    assert counted.source == "provider" and counted.input_tokens == 3
