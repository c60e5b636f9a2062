"""transport: the only stage that does IO. Sends the wire request with httpx, yields the body.

The response is always read as a stream, so a non-streamed answer costs no extra copy and a
streamed one arrives chunk by chunk. A non-2xx answer is read (up to a limit) and raised as
HTTPFailure for the provider's codec to classify; connection failures become NetworkError.
The response is closed however the caller leaves.

Every wait has an end, all on one clock (anyio's) and all set here, in ``Options`` and the
call's deadline (``Call.deadline``, from ``AdapterConfig.timeout_seconds``): the response's
head is due by the deadline (streamed: within ``first_event_timeout`` too), the first body
bytes within ``first_event_timeout`` of sending (streamed) or ``idle_timeout`` of the head
(not streamed), and each later read within ``idle_timeout``; nothing outlasts the deadline.
That holds for every body, error bodies included, and ``cancel()`` interrupts any of these
waits. One loop reads every body: on a real socket each read is bounded at the socket
(``socket_reads``), elsewhere (mock transports) each read waits in a cancel scope.

The exchange itself is :mod:`metis.transport.exchange`: the provider's send loop, its
``fetch`` (``count_tokens``, a lifespan's checks) and this stage, run on its own, all open
one there, so every request the provider sends has the same protections.
"""

from __future__ import annotations

import functools
import os
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from metis.errors import CancelledError, ConfigError
from metis.pipeline.call import Call
from metis.pipeline.config import AdapterConfig
from metis.pipeline.request import ResponseHead, ResponseItem, WireRequest
from metis.pipeline.services import StageServices, no_client
from metis.pipeline.stage import Inner, Stage
from metis.transport.clients import CONNECT_TIMEOUT

if TYPE_CHECKING:
    from metis.transport.exchange import Exchange
    from metis.transport.failures import Limits

__all__ = ["CONNECT_TIMEOUT", "TRANSPORT_SETTING", "Transport", "http_client"]


TRANSPORT_SETTING = "METIS_HTTP_TRANSPORT"
"""The environment variable that names the transport of the clients metis makes: ``lean``
(the default) or ``httpx`` (docs/http-client.md, "Which transport")."""


ASKED_ENCODINGS = {"accept-encoding": "gzip, deflate"}
"""What metis decodes in bounded pieces (metis/transport/decoding.py): httpx would also ask
for zstd or br when their modules are installed, and decodes each of those chunks whole."""


def http_client(
    timeout_seconds: float = 600.0, keep_alive: int | None = None, *, lean: bool | None = None
) -> httpx.AsyncClient:
    """The client an adapter makes when the application gives none: it follows no redirects,
    pools connections as the official SDKs do (``keep_alive`` of them kept idle), and opens
    them with a connect timeout that counts only the connection's own wait
    (metis/transport/connect.py). Its timeouts only matter to requests that bring none; the
    transport's always do. (The send path's modules, httpcore with them, load with the first
    client or the first request: building an adapter does not need them.)

    ``lean`` (None: as ``METIS_HTTP_TRANSPORT`` says, lean by default): send over metis's own
    HTTP/1.1 transport (metis/transport/http1.py) when httptools is installed, else over
    httpx's. A call that goes to httpx's transport (every call without httptools or with
    ``lean=False``; under the lean one, those it hands on: trio, a proxy, a mocked httpx)
    first waits for one of metis's connection slots (metis/transport/slots.py)."""
    from metis.transport import connect, direct, routes
    from metis.transport import slots as pool

    size = pool.MAX_CONNECTIONS
    keep_alive = pool.MAX_KEEPALIVE if keep_alive is None else keep_alive
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=keep_alive)
    context = default_tls_context()
    lean = lean_by_default() if lean is None else lean
    transport = _lean_transport(context, limits) if lean else None
    if transport is None:
        transport = httpx.AsyncHTTPTransport(verify=context, limits=limits)
    proxies = routes.environment_proxies()
    try:
        mounts = {key: _over(url, context, limits) for key, url in proxies.items()}
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_seconds, connect=CONNECT_TIMEOUT),
            headers=ASKED_ENCODINGS,
            limits=limits,
            follow_redirects=False,
            verify=context,
            transport=transport,
            mounts=mounts,
        )
    except (ValueError, httpx.InvalidURL) as exc:  # only a proxy or NO_PROXY entry can fail
        bypassed = ", ".join(key for key, url in proxies.items() if url is None) or "none"
        raise ConfigError(
            f"the environment's proxy settings (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) "
            f"cannot be used: {exc} (NO_PROXY read as: {bypassed})"
        ) from None
    routed = routes.Routes(transport, mounts, proxies)
    routes.register(client, routed)
    pool.give_slots(client, size)
    for each in routed.transports():  # a connect timeout a busy event loop cannot run out
        connect.install_on(each)
    return direct.send_directly(client)


def lean_by_default() -> bool:
    """Whether the clients metis makes use the lean transport, as ``METIS_HTTP_TRANSPORT``
    says (unset or empty: yes, but on Windows, where asyncio's default loop may not wait on
    the socket it opens: metis/transport/connect.py); a value other than ``lean`` or
    ``httpx`` is a ConfigError."""
    value = os.environ.get(TRANSPORT_SETTING, "").strip()
    if value == "":
        return sys.platform != "win32"
    if value == "lean":
        return True
    if value == "httpx":
        return False
    raise ConfigError(
        f"{TRANSPORT_SETTING}={value!r}: expected 'lean' (metis's HTTP/1.1 transport, "
        "the default) or 'httpx' (httpx's own transport)"
    )


def _over(
    proxy: str | None, context: ssl.SSLContext, limits: httpx.Limits
) -> httpx.AsyncBaseTransport | None:
    """httpx's own transport over ``proxy`` (one the environment names: httpx mounts them only
    for a client without a transport of its own, metis/transport/routes.py), None for none."""
    if proxy is None:
        return None
    return httpx.AsyncHTTPTransport(proxy=proxy, verify=context, limits=limits)


def _lean_transport(
    context: ssl.SSLContext, limits: httpx.Limits
) -> httpx.AsyncBaseTransport | None:
    try:
        from metis.transport.http1 import LeanTransport
    except ImportError:  # no httptools (no wheel for the platform): httpx's own transport
        return None
    return LeanTransport(verify=context, limits=limits)


def default_tls_context() -> ssl.SSLContext:
    """The TLS context httpx would make for a client with the default ``verify`` (the CA file
    or directory ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names, else certifi's; keys logged to
    ``SSLKEYLOGFILE``), made once for those settings and shared by the clients metis makes:
    each would otherwise read the whole CA store again (~100 ms of CPU an adapter's first
    call). Every such client offers HTTP/1.1 only, so the ALPN list httpcore sets on it before
    each connection is the same for all."""
    names = ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE")
    return _tls_context_for(tuple(os.environ.get(name) for name in names))


@functools.lru_cache(maxsize=4)
def _tls_context_for(settings: tuple[str | None, ...]) -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=True)  # reads the settings keyed above


class Transport(Stage[WireRequest, Any, Any, ResponseItem]):
    name = "transport"
    terminal = True
    role = "transport"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        connect_timeout: float = Field(default=CONNECT_TIMEOUT, gt=0)
        first_event_timeout: float = Field(
            default=120.0, gt=0, description="streamed: from sending to the first body bytes"
        )
        idle_timeout: float = Field(
            default=120.0, gt=0, description="the longest silence between body chunks"
        )
        max_error_body_bytes: int = Field(default=1 << 20, ge=1024)

    options: Options
    _http: Callable[[], httpx.AsyncClient] = staticmethod(no_client)
    _timeout_seconds: float = AdapterConfig.model_fields["timeout_seconds"].default

    def bind(self, services: StageServices) -> None:
        self._http = services.http
        self._timeout_seconds = services.config.timeout_seconds

    @property
    def limits(self) -> Limits:
        from metis.transport.failures import Limits

        opts = self.options
        return Limits(
            connect_timeout=opts.connect_timeout,
            first_event_timeout=opts.first_event_timeout,
            idle_timeout=opts.idle_timeout,
            max_error_body_bytes=opts.max_error_body_bytes,
            timeout_seconds=self._timeout_seconds,
        )

    async def open(self, request: WireRequest, call: Call) -> Exchange:
        """Send ``request`` on the adapter's session: the exchange once its head is in."""
        from metis.transport.exchange import open_exchange

        return await open_exchange(self._http(), request, call, self.limits)

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[ResponseItem]:
        exchange = await self.open(request, call)
        try:
            yield ResponseHead(exchange.status, exchange.content_type)
            read, clock = exchange.read, exchange.clock
            while (chunk := await read()) is not None:
                clock.received = True
                if call.cancel.cancelled:
                    raise CancelledError("the call was cancelled")
                yield chunk
        except Exception as exc:
            translated = exchange.translate(exc)
            if translated is exc:
                raise
            raise translated from exc
        finally:
            await exchange.aclose()
