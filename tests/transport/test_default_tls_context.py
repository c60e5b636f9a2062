"""The TLS context of the clients metis makes (metis/transport/stage.py ``http_client``): made
once for the environment's certificate settings and shared, as httpx would make it for each
client, so that an adapter's first call does not read the CA store again."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from metis.transport.stage import default_tls_context, http_client


def context_of(client: httpx.AsyncClient) -> ssl.SSLContext:
    transport: Any = client._transport
    lean = getattr(transport, "ssl_context", None)  # metis/transport/http1.py
    return lean if lean is not None else transport._pool._ssl_context  # type: ignore[no-any-return]


def test_the_clients_metis_makes_share_one_context() -> None:
    first, second, third = http_client(), http_client(5.0), http_client(lean=False)
    assert context_of(first) is context_of(second) is context_of(third) is default_tls_context()
    assert context_of(third) is first._transport.fallback()._pool._ssl_context  # type: ignore[attr-defined]


@contextlib.contextmanager
def https_server(ca: trustme.CA) -> Iterator[int]:
    """A loopback HTTPS server in a thread answering one request ``200 ok``; its port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with context.wrap_socket(conn, server_side=True) as sock:
                while b"\r\n\r\n" not in sock.recv(4096):
                    pass
                sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(5)


@pytest.mark.anyio
async def test_the_ca_file_the_environment_names_is_trusted_and_the_default_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with https_server(ca) as port:
        async with http_client() as client:
            with pytest.raises(httpx.ConnectError) as refused:
                await client.get(f"https://127.0.0.1:{port}/")
    assert any(isinstance(e, ssl.SSLCertVerificationError) for e in chain(refused.value))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    with https_server(ca) as port:
        async with http_client() as client:
            assert context_of(client) is not _default_without_settings()
            reply = await client.get(f"https://127.0.0.1:{port}/")
    assert reply.status_code == 200
    assert reply.content == b"ok"


def chain(error: BaseException | None) -> Iterator[BaseException]:
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def _default_without_settings() -> ssl.SSLContext:
    with pytest.MonkeyPatch.context() as patch:
        for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE"):
            patch.delenv(name, raising=False)
        return default_tls_context()
