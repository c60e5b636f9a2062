"""Which redirects the transport follows: never one that would take the credentials elsewhere.

The transport always sends with httpx's own redirect following off, so every hop passes here.
metis's own client does not follow redirects at all. A client the application injected with
``follow_redirects=True`` gets same-origin hops followed, with the request's method, body and
headers, up to the client's ``max_redirects``. A hop to another origin (scheme, host or port)
is refused: the provider's key headers would go with it. A redirect that is refused, or that
never ends, is a RedirectError, which no retry repeats.
"""

from __future__ import annotations

import httpx

from metis.errors import RedirectError
from metis.pipeline.call import Call


def redirect_target(
    request: httpx.Request,
    response: httpx.Response,
    client: httpx.AsyncClient,
    call: Call,
    hops: int,
) -> httpx.URL:
    """Where to send ``request`` again after the redirect ``response``, its ``hops``-th."""
    status = response.status_code
    location = response.headers.get("location", "")
    try:
        target = request.url.join(location)
    except httpx.InvalidURL:
        said = f"{call.provider} answered HTTP {status}, a redirect to {location[:100]!r}"
        raise _refused(f"{said}, which is not a URL (is base_url right?)", call, status) from None
    where = f"{call.provider} answered HTTP {status}, a redirect to {_origin(target)}"
    if not client.follow_redirects:
        refusal = f"{where}; metis does not follow redirects (is base_url right?)"
        raise _refused(refusal, call, status)
    if _origin(target) != _origin(request.url):
        raise _refused(
            f"{where}, another origin; refused, so the API key does not go there", call, status
        )
    if hops > client.max_redirects:
        raise _refused(f"{where}: more than {client.max_redirects} redirects", call, status)
    return target


def _origin(url: httpx.URL) -> str:
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return f"{url.scheme}://{url.host}:{port}"


def _refused(message: str, call: Call, status: int) -> RedirectError:
    return RedirectError(
        message, provider=call.provider, request_id=call.request_id, provider_status=status
    )
