"""The context every stage receives: what it may know about the call in progress."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metis.config import AdapterConfig
from metis.errors import redact
from metis.estimate import DEFAULT_PROFILE, TokenProfile
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import ProviderRaw
from metis.model.response import DroppedContent
from metis.pipeline.cancellation import CancelHandle
from metis.pipeline.warned import SessionWarnings, session_warnings
from metis.telemetry import NULL_SINK, TelemetrySink

if TYPE_CHECKING:
    import httpx

    from metis.pipeline.stack import Endpoint
    from metis.session import ToolIdStore

log = logging.getLogger("metis")


@dataclass(slots=True, eq=False)
class Call:
    """One call through a pipeline. Stages are shared by concurrent calls, so anything that
    belongs to a single call lives here or in the stage's own local variables, never on the
    stage object."""

    request_id: str
    provider: str
    model: str
    wire_model: str
    config: AdapterConfig
    endpoint: Endpoint
    capabilities: AdapterCapabilities
    http: httpx.AsyncClient
    tool_ids: ToolIdStore
    session_id: str | None = None
    log: logging.Logger = log
    attempt: int = 0
    """How many times this call has been retried so far (0 on the first attempt)."""
    cancel: CancelHandle = field(default_factory=CancelHandle)
    telemetry: TelemetrySink = NULL_SINK
    token_profile: TokenProfile = DEFAULT_PROFILE
    """How the provider counts input tokens (the stack's ``token_estimate``)."""
    response_content_type: str | None = None
    """The ``content-type`` of the answer being read, set by the transport before its first
    bytes: ``decode`` reads a streamed request answered with a whole JSON body by it."""
    deadline: float = math.inf
    """When the whole call must be over, on the event loop's clock (``anyio.current_time()``):
    every attempt, read, backoff sleep and store call of the call ends by then."""
    warnings: list[DroppedContent] = field(default_factory=list)
    """Every drop of this call, returned with its result (``message.complete.warnings``)."""
    warned: SessionWarnings = field(default_factory=lambda: session_warnings)
    """Which drops the session was already warned about."""

    def produced(self, origin: ProviderRaw | None) -> bool:
        """Whether content recorded as made by ``origin`` was made by this call's provider and
        model: the only place its opaque parts (signatures, reasoning) may go back to."""
        return (
            origin is not None and origin.provider == self.provider and origin.model == self.model
        )

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        """The one structured WARN record for content a provider cannot take: logged once per
        session (the same drop on a later turn is only listed with that call's result)."""
        secrets = self.endpoint.secrets  # the names and reasons may quote what the server sent
        block_type, reason = redact(block_type, *secrets), redact(reason, *secrets)
        details = tuple(sorted((name, repr(value)) for name, value in extra.items()))
        key = (self.provider, message_id, block_type, reason, details)
        first = self.session_id is None or self.warned.first_time(
            self.session_id, key, self.request_id
        )
        self.warnings.append(
            DroppedContent(
                block_type=block_type,
                reason=reason,
                provider=self.provider,
                message_id=message_id,
                repeated=not first,
            )
        )
        if not first:
            return
        self.log.warning(
            "dropped %s block for %s: %s",
            block_type,
            self.provider,
            reason,
            extra={
                "event": "metis.lossy_projection",
                "session_id": self.session_id,
                "request_id": self.request_id,
                "message_id": message_id,
                "block_type": block_type,
                "adapter": self.provider,
                "reason": reason,
                **extra,
            },
        )
