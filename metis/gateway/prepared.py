"""A request of a served API read into the canonical form and planned for its model: what the
gateway's paths (translated, routed, counted) are given once a request is prepared."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from metis.gateway.inbound import Inbound
from metis.gateway.item_ids import GivenIds
from metis.gateway.models import Target
from metis.gateway.store import Owner
from metis.model.request import CanonicalRequest


@dataclass(slots=True)
class Prepared:
    inbound: Inbound
    target: Target
    request: CanonicalRequest
    dropped: list[str]
    """What the request's projection on its model left out (metis.gateway.projection)."""
    owner: Owner = ""
    """The key whose Responses conversations it may continue and keeps (metis.gateway.store)."""
    started: float = field(default_factory=time.monotonic)
    ids: GivenIds | None = None
    """A Responses request's items' ids known before its answer (metis.gateway.item_ids)."""

    @property
    def reported(self) -> list[str]:
        """What the gateway left out of the request: the reader's, then the projection's."""
        return [*self.inbound.said(), *self.dropped]
