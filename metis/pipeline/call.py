"""The identity of the call in progress, which every stage receives with it."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from metis.errors import redact
from metis.model.history import History, history_of

if TYPE_CHECKING:
    from metis.model.content import Message, ProviderRaw
    from metis.model.response import DroppedContent
from metis.pipeline.cancellation import CancelHandle
from metis.pipeline.warned import SessionWarnings, session_warnings

log = logging.getLogger("metis")
PROCESS = "\x00process"
"""The record under which the drops a model settles are warned once per process, for calls
with no session (no session id has this form)."""


@dataclass(slots=True, eq=False)
class DropRecord:
    """What one call had to leave out (returned with its result as
    ``message.complete.warnings``) and the session memory that warns of each drop once."""

    secrets: tuple[str, ...] = ()
    """Values hidden from the drop reasons, errors and telemetry of the call: the adapter's
    (its key: a reason may quote the server), and those fetched for it (:meth:`Call.add_secret`)."""
    warned: SessionWarnings = field(default_factory=lambda: session_warnings)
    """Which drops each session was already warned about."""
    warnings: list[DroppedContent] = field(default_factory=list)
    """Every drop of this call, in order."""
    logged: set[Any] = field(default_factory=set)
    """The kinds of drop this call logged (one WARN line each, however many messages)."""


@dataclass(frozen=True, slots=True)
class CallTerms:
    """What a caller above the adapter (a :class:`~metis.routing.Router`) settled for one call
    before handing it over: when the call must be over (``deadline``, on the event loop's clock,
    in place of ``timeout_seconds`` from now), how many times the adapter may retry it, and
    whether the model's capabilities were already checked against the request (the
    ``capability_check`` stage then does not check them again)."""

    deadline: float | None = None
    max_retries: int | None = None
    capabilities_checked: bool = False

    def deadline_after(self, timeout_seconds: float) -> float:
        """The call's deadline: the one settled, else ``timeout_seconds`` from now."""
        if self.deadline is not None:
            return self.deadline
        return anyio.current_time() + timeout_seconds


NO_TERMS = CallTerms()


@dataclass(slots=True, eq=False)
class Call:
    """One call through a pipeline: its identity, and nothing a stage could keep itself.

    Stages are shared by concurrent calls, so anything that belongs to a single call lives
    here or in the stage's own local variables, never on the stage object. What a stage needs
    from its adapter (the HTTP client, the tool-id store, settings) it received when it was
    built (:meth:`metis.pipeline.stage.Stage.bind`)."""

    request_id: str
    provider: str
    """The adapter's name."""
    model: str
    """The canonical model id (``provider:name``)."""
    wire_model: str
    """The provider's name for the model."""
    session_id: str | None = None
    attempt: int = 0
    """How many times this call has been retried so far (0 on the first attempt)."""
    cancel: CancelHandle = field(default_factory=CancelHandle)
    deadline: float = math.inf
    """When the whole call must be over, on the event loop's clock (``anyio.current_time()``):
    every attempt, read, backoff sleep and store call of the call ends by then."""
    drops: DropRecord = field(default_factory=DropRecord)
    """What the call left out, reported with its result (:meth:`warn_dropped`)."""
    terms: CallTerms = field(default_factory=lambda: NO_TERMS)
    """What the caller above the adapter settled for the call (its retries, its check)."""
    seen: tuple[Sequence[Message], History] | None = field(default=None, repr=False)
    """The messages :meth:`history` was last asked about, and their record."""

    def history(self, messages: Sequence[Message]) -> History:
        """The record of ``messages`` (:func:`metis.model.history.history_of`), looked up once
        per call for the same list: a request's messages are not changed while its call runs
        (docs/stages.md)."""
        seen = self.seen
        if seen is not None and seen[0] is messages:
            return seen[1]
        record = history_of(messages)
        self.seen = (messages, record)
        return record

    @property
    def secrets(self) -> tuple[str, ...]:
        """What no error, warning or telemetry event of this call may show: the adapter's
        secrets and the credentials fetched for the call (longest first)."""
        return self.drops.secrets

    def add_secret(self, *values: str | None) -> None:
        """Hide ``values`` too: credentials a stage fetched for this call (a cloud access
        token, an AWS secret key or session token), which a server may echo back."""
        new = [value for value in values if value and value not in self.drops.secrets]
        if new:
            found = (*self.drops.secrets, *new)
            self.drops.secrets = tuple(sorted(set(found), key=len, reverse=True))

    @property
    def warnings(self) -> list[DroppedContent]:
        """Every drop of this call so far."""
        return self.drops.warnings

    def produced(self, origin: ProviderRaw | None) -> bool:
        """Whether content recorded as made by ``origin`` was made by this call's provider and
        model: the only place its opaque parts (signatures, reasoning) may go back to."""
        return (
            origin is not None and origin.provider == self.provider and origin.model == self.model
        )

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        """The one structured WARN record for content a provider cannot take: one line per
        kind of drop (block type, provider, reason), naming the first message it was found in,
        once per session; a drop no message holds (a setting the model does not take) once per
        process and model when the call has no session. Every drop, of every message, is
        listed with the call's result, marked ``repeated`` where an earlier call of the session
        dropped the same content (the kind, in the same message): a logged kind found in a new
        message is not logged again, but is not ``repeated`` either."""
        from metis.model.response import DroppedContent  # loaded by any call that ran

        secrets = self.drops.secrets  # the names and reasons may quote what the server sent
        block_type, reason = redact(block_type, *secrets), redact(reason, *secrets)
        details = tuple(sorted((name, repr(value)) for name, value in extra.items()))
        key = (self.provider, block_type, reason, details)
        warned, session, request_id = self.drops.warned, self.session_id, self.request_id
        kind_logged = session is not None and not warned.first_time(session, key, request_id)
        same = (*key, message_id)
        repeated = session is not None and not warned.first_time(session, same, request_id)
        self.drops.warnings.append(
            DroppedContent(
                block_type=block_type,
                reason=reason,
                provider=self.provider,
                message_id=message_id,
                repeated=repeated,
            )
        )
        if kind_logged or key in self.drops.logged:
            return
        self.drops.logged.add(key)
        settled = self.session_id is None and message_id is None  # the model settles it
        if settled and not warned.first_time(PROCESS, (self.model, *key), self.request_id):
            return
        log.warning(
            "dropped %s%s for %s: %s",
            block_type,
            f" at {message_id}" if message_id else "",  # the first message of the kind
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
