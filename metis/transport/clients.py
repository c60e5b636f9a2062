"""The HTTP clients metis sends with, and what their failures mean.

An adapter sends with an ``httpx.AsyncClient`` or an ``httpx2.AsyncClient``. httpx2 is
Pydantic's continuation of httpx: a fork of httpx 0.28.1 with the package renamed (and httpcore
with it, to httpcore2) and the public API kept, so the transport calls both the same way
(``build_request``, ``send(stream=True)``, ``aiter_bytes``, ``aclose``, ``follow_redirects``,
``max_redirects``, the ``network_stream`` extension of an HTTP/1.1 response). Two things
differ, and this module is where they are handled:

- each package has its own classes, so an ``httpx2.ReadTimeout`` is not an ``httpx.HTTPError``:
  :func:`http_errors`, :func:`is_timeout`, :func:`is_read_timeout` and
  :func:`is_connect_failure` answer for both;
- a ``Timeout`` object of one package is not understood by the other's client:
  :func:`request_timeout` gives the 4-tuple both accept.

(A third, httpx2 logging as "httpx2", is met where the log filter is installed:
``metis.core.secrets.install_httpx_log_filter``.)

httpx2 is never imported here: a client of it can only exist once the application has imported
it, so its classes are looked up in ``sys.modules`` when a failure is classified. An
application that called ``httpx2.alias_httpx()`` has one package under both names, which
changes nothing here.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, cast

import httpx
from pydantic import AfterValidator

from metis.transport.httpx_private import own_transport

if TYPE_CHECKING:
    import httpx2

    AsyncHTTPClient: TypeAlias = httpx.AsyncClient | httpx2.AsyncClient
    """An HTTP client metis can send with."""
else:

    def _check_client(value: object) -> object:
        if not isinstance(value, client_classes()):
            raise ValueError(  # pydantic reports it as a ValidationError naming the field
                "expected an httpx.AsyncClient or an httpx2.AsyncClient, "
                f"got a {type(value).__module__}.{type(value).__qualname__}"
            )
        return value

    AsyncHTTPClient = Annotated[Any, AfterValidator(_check_client)]

CONNECT_TIMEOUT = 10.0
"""Seconds a new connection may take, in the clients metis makes and the transport's default."""


def as_httpx(client: AsyncHTTPClient) -> httpx.AsyncClient:
    """``client``, typed as httpx's: the stages are written and type-checked against httpx's
    API, which httpx2 keeps name for name; at run time it is the client that was given."""
    return cast(httpx.AsyncClient, client)


def _packages() -> tuple[ModuleType, ...]:
    other = sys.modules.get("httpx2")
    return (httpx,) if other is None or other is httpx else (httpx, other)


def client_classes() -> tuple[type[Any], ...]:
    """The async client classes of the packages in use."""
    return tuple(package.AsyncClient for package in _packages())


def sends_over_network(client: object) -> bool:
    """Whether ``client`` sends over connections of its own (its package's
    ``AsyncHTTPTransport``), not through a mock or in-process transport."""
    transport = own_transport(client)
    if getattr(transport, "sends_over_network", False) is True:  # metis/transport/http1.py
        return True
    return isinstance(transport, tuple(package.AsyncHTTPTransport for package in _packages()))


def http_errors(*others: type[Exception]) -> tuple[type[Exception], ...]:
    """What either client raises for a request that failed (``HTTPError``), and ``others``:
    for an ``except`` clause, which evaluates it only when an exception is being handled."""
    return (*(package.HTTPError for package in _packages()), *others)


def is_timeout(error: BaseException) -> bool:
    """Whether a wait of the client's ran out (connect, read, write or pool)."""
    return isinstance(error, tuple(package.TimeoutException for package in _packages()))


def is_read_timeout(error: BaseException) -> bool:
    """Whether a read of the response ran out of time."""
    return isinstance(error, tuple(package.ReadTimeout for package in _packages()))


def is_decoding_error(error: BaseException) -> bool:
    """Whether the body did not decode as its ``Content-Encoding`` says (not gzip, ...)."""
    return isinstance(error, tuple(package.DecodingError for package in _packages()))


def is_connect_failure(error: BaseException) -> bool:
    """Whether no connection could be made (refused, unresolvable, or too slow to open)."""
    kinds = tuple(kind for p in _packages() for kind in (p.ConnectError, p.ConnectTimeout))
    return isinstance(error, kinds)


def request_timeout(seconds: float, connect: float) -> tuple[float, float, float, float]:
    """A request's timeouts as (connect, read, write, pool), the form both clients accept."""
    return (connect, seconds, seconds, seconds)
