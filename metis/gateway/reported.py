"""What the gateway left out of a request: named in the answer's ``x-metis-dropped`` header
and logged (docs/gateway.md, "What a request goes through")."""

from __future__ import annotations

import logging
import re
from typing import Protocol

from metis.gateway.inbound import Inbound
from metis.gateway.store import whose
from metis.model.events import MessageComplete, MessageStart
from metis.model.response import CanonicalResponse

log = logging.getLogger("metis.gateway")
UNPRINTABLE = re.compile(r"[^\x20-\x7e]")
"""What an HTTP header value may not hold (a control character ends the connection)."""
DROPPED_HEADER = "x-metis-dropped"  # names what the gateway left out (docs/gateway.md)


class Prepared(Protocol):
    """A prepared request (metis.gateway.service.Prepared), as far as its report goes."""

    inbound: Inbound
    owner: str

    @property
    def reported(self) -> list[str]: ...


def warnings_of(response: CanonicalResponse | MessageStart | MessageComplete) -> list[str]:
    """What the library left out, each said once (a cache hint per block is one warning
    each where the provider has no form for any)."""
    said = (f"{w.block_type} ({w.reason})" for w in response.warnings if not w.repeated)
    return list(dict.fromkeys(said))


def dropped_headers(reported: list[str]) -> dict[str, str]:
    if not reported:
        return {}
    text = UNPRINTABLE.sub("?", "; ".join(reported)[:2000])  # the caller's own field names
    return {DROPPED_HEADER: text}


def log_reported(prepared: Prepared) -> None:
    """What the gateway left out of the request, logged if anything (when the request's task
    first waits: metis.gateway.ahead.soon)."""
    if reported := prepared.reported:
        log_dropped(prepared, reported)


def log_dropped(prepared: Prepared, reported: list[str]) -> None:
    log.warning(
        "left out of the request for %s%s: %s",
        prepared.inbound.model,
        whose(prepared.owner),
        "; ".join(reported),
        extra={"event": "metis.gateway.dropped", "model": prepared.inbound.model},
    )
