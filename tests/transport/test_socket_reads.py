"""The socket side of the transport's reads: on a real socket each read is timed at the socket
and cancel() shuts it, touching only the response they were made for."""

from __future__ import annotations

import anyio
import httpx
import pytest

from metis.transport.socket_reads import bound_socket_reads, socket_abort

from ..fault_proxy import HANG, FaultProxy, chunk, chunked_head, response


@pytest.mark.anyio
async def test_each_read_of_a_real_socket_gets_the_time_the_transport_allows() -> None:
    async with FaultProxy.running() as proxy, httpx.AsyncClient(timeout=3600) as client:
        proxy.script(chunked_head() + chunk(b"data: first\n\n"), HANG)  # in one write
        request = client.build_request("POST", f"{proxy.url}/v1/messages", content=b"{}")
        reply = await client.send(request, stream=True)
        restore = bound_socket_reads(reply, lambda: 0.1)
        assert restore is not None  # a real socket: no cancel scope per read is needed
        stream = reply.extensions["network_stream"]
        assert "read" in vars(stream)
        chunks = reply.aiter_bytes()
        assert await anext(chunks) == b"data: first\n\n"
        # the client's own read timeout is an hour: the bound on a hang comes long before it
        with anyio.fail_after(60), pytest.raises(httpx.ReadTimeout):
            await anext(chunks)
        await reply.aclose()
        restore()
        assert "read" not in vars(stream)


@pytest.mark.anyio
async def test_a_mock_transport_has_no_socket_to_bound() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"{}"))
    async with httpx.AsyncClient(transport=transport) as client:
        reply = await client.get("http://test/")
        assert bound_socket_reads(reply, lambda: 1.0) is None
        assert socket_abort(reply) is None


@pytest.mark.anyio
async def test_an_abort_after_the_response_ended_leaves_its_pooled_connection_alone() -> None:
    async with FaultProxy.running() as proxy, httpx.AsyncClient(timeout=10) as client:
        proxy.script(response(200, b"{}"))
        proxy.script(response(200, b"{}"))
        first = await client.post(f"{proxy.url}/v1/messages", content=b"{}")
        abort = socket_abort(first)
        assert abort is not None
        abort()  # a cancel landing once the body is in and the connection is back in the pool
        second = await client.post(f"{proxy.url}/v1/messages", content=b"{}")
        assert second.status_code == 200
        assert [r.connection for r in proxy.requests] == [1, 1]  # the same, still usable


@pytest.mark.anyio
async def test_an_abort_during_the_body_ends_the_pending_read_at_once() -> None:
    async with FaultProxy.running() as proxy, httpx.AsyncClient(timeout=3600) as client:
        proxy.script(chunked_head() + chunk(b"data: first\n\n"), HANG)  # in one write
        request = client.build_request("POST", f"{proxy.url}/v1/messages", content=b"{}")
        reply = await client.send(request, stream=True)
        abort = socket_abort(reply)
        assert abort is not None
        chunks = reply.aiter_bytes()
        assert await anext(chunks) == b"data: first\n\n"

        async def abort_soon() -> None:
            await anyio.sleep(0.2)
            abort()

        with anyio.fail_after(60):  # a bound on a hang: the client's own read timeout is an hour
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(abort_soon)
                with pytest.raises(httpx.RemoteProtocolError):
                    await anext(chunks)
        await reply.aclose()
