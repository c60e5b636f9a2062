"""The gateway's access log (docs/gateway.md, "Access log"): one line per HTTP request when it
ends, at INFO through the ``metis.gateway`` logger (``event: metis.gateway.access``): its
method and path, status, duration, first-byte time (a stream's), the API, the model asked and
the one that served it, the gateway key's name (never the key), tokens in and out, cost, the
request id its response headers carry, and how it ended.

The ASGI wrapper :class:`AccessLog` notes what the server sees (status, bytes, the client
going); what only the handlers know is noted as they count it in ``/metrics``
(metis.gateway.metrics) and as they find the key, on the :class:`AccessLine` of the request
being answered (:data:`ACCESS`, a context variable its tasks share)."""

from __future__ import annotations

import json
import logging
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from metis.errors import AdapterError
from metis.gateway.errors import BODY_LATE, GatewayTimeoutError, RequestTimeoutError
from metis.gateway.hidden import shown

log = logging.getLogger("metis.gateway")
_EVENT = {"event": "metis.gateway.access"}
_PLAIN = re.compile(r"[\x21-\x7e]{1,200}")
_ID_HEADERS = (b"request-id", b"x-request-id")

COMPLETED, REFUSED, ERROR, UPSTREAM_ERROR, TIMEOUT, CLIENT_GONE = (
    "completed",
    "refused",
    "error",
    "upstream_error",
    "timeout",
    "client_gone",
)
"""How a request ended (``end=`` of its line; docs/gateway.md says which is which)."""


@dataclass(slots=True)
class AccessLine:
    """What one request's line says, noted as it is answered."""

    method: str
    path: str
    started: float
    api: str = ""
    model: str = ""
    served: str = ""
    key: str = ""
    status: int = 0
    stream: bool = False
    first_byte: float | None = None
    sent_all: bool = False
    gone: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    usd: Decimal | None = None
    request_id: str = ""
    failure: str = ""
    """The ending a failure counted for it made (upstream_error, timeout, error)."""
    hidden: str = ""
    """The whole message of a failure its client was told without the upstream's address."""

    def failed(self, error: AdapterError | str) -> None:
        """A failure counted for the request: the upstream's (a provider's error, or its
        error event in a stream), the deadline's, or the gateway's own."""
        if isinstance(error, str):
            self.failure = ERROR if error == "other" else UPSTREAM_ERROR
            return
        if shown(error) != error.message:
            self.hidden = error.message
        if isinstance(error, GatewayTimeoutError | RequestTimeoutError):
            self.failure = TIMEOUT
        elif error.provider is not None or error.provider_status is not None:
            self.failure = UPSTREAM_ERROR
        else:
            self.failure = ERROR

    def ending(self) -> str:
        if self.gone or self.status == 499:
            return CLIENT_GONE
        if self.failure in (TIMEOUT, UPSTREAM_ERROR):
            return self.failure
        if self.status >= 500 or (self.failure == ERROR and self.status < 400):
            return ERROR  # the gateway's own failure, mid-stream too
        return REFUSED if self.status >= 400 else COMPLETED

    def text(self, now: float) -> str:
        parts = [
            f"{self.method} {_plain(self.path)} status={self.status}",
            f"ms={(now - self.started) * 1000:.1f}",
        ]
        if self.stream and self.first_byte is not None:
            parts.append(f"first_byte_ms={(self.first_byte - self.started) * 1000:.1f}")
        if self.api:
            parts.append(f"api={self.api}")
        parts.append(f"model={_plain(self.model) if self.model else '-'}")
        parts.append(f"served={self.served or '-'} key={_plain(self.key) if self.key else '-'}")
        if self.tokens_in is not None:
            parts.append(f"in={self.tokens_in} out={self.tokens_out}")
        if self.usd is not None:
            parts.append(f"usd={self.usd:f}")
        parts.append(f"request_id={_plain(self.request_id) if self.request_id else '-'}")
        parts.append(f"end={self.ending()}")
        if self.hidden:
            parts.append(f"error={json.dumps(self.hidden[:500])}")
        return " ".join(parts)


ACCESS: ContextVar[AccessLine | None] = ContextVar("metis_gateway_access", default=None)
"""The line of the request being answered (None: no access log, or not a request's task)."""


def _plain(text: str) -> str:
    """``text`` as one word of the line: quoted (JSON's escapes) unless plain printable ASCII,
    so a path or name cannot forge a line or a field."""
    if _PLAIN.fullmatch(text) and '"' not in text:
        return text
    return json.dumps(text[:200])


class AccessLog:
    """An ASGI application that logs a line for each HTTP request ``app`` answers, when it
    ends (however it ends: a failure raised through here is logged, then raised on)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        line = AccessLine(scope["method"], scope["path"], time.monotonic())
        token = ACCESS.set(line)

        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect" and not line.sent_all:
                line.gone = BODY_LATE not in scope  # else the server's 408 ended the body
            return message

        async def sending(message: Any) -> None:
            if line.first_byte is None or not message.get("more_body"):  # not a stream's next
                _sent(line, message)
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except BaseException:
            line.status = line.status or 500
            line.failure = line.failure or ERROR
            raise
        finally:
            ACCESS.reset(token)
            log.info("%s", line.text(time.monotonic()), extra={**_EVENT, "access": line})


def _sent(line: AccessLine, message: Any) -> None:
    """What ``message`` says of the answer: from its head, the status, the request id and
    whether it is a stream; from its body, when its first bytes went and whether it ended."""
    if message["type"] == "http.response.body":
        if line.first_byte is None and message.get("body"):
            line.first_byte = time.monotonic()
        if not message.get("more_body"):
            line.sent_all = True
        return
    if message["type"] != "http.response.start":
        return
    line.status = message["status"]
    for name, value in message.get("headers") or ():
        if name in _ID_HEADERS:
            line.request_id = value.decode("latin-1")
        elif name == b"content-type":
            line.stream = value.startswith(b"text/event-stream")


def note_asked(body: Any) -> None:
    """The model a request's body names, noted whether the configuration has it or not."""
    if (line := ACCESS.get()) is not None and isinstance(body, dict):
        asked = body.get("model")
        line.model = asked if isinstance(asked, str) else ""
