"""What an adapter gives the stages it builds: each stage keeps the parts it uses.

A stage receives these once, when its adapter assembles the pipeline (:meth:`Stage.bind`),
not with every call: the :class:`~metis.pipeline.call.Call` a stage sees carries only the call's
identity. The transport keeps the HTTP client, ``tool_ids`` the session store, ``telemetry`` the
sink, ``capability_check`` the per-model capabilities and token profile (docs/stages.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from metis.catalog.token_profile import DEFAULT_PROFILE, TokenProfile
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.config import AdapterConfig
from metis.pipeline.settings import NoSettings, ProviderSettings
from metis.telemetry import NULL_SINK, TelemetrySink

if TYPE_CHECKING:
    import httpx

    from metis.pipeline.endpoint import Endpoint
    from metis.pipeline.stores import ToolIdStore


def no_client() -> httpx.AsyncClient:
    from metis.errors import StackError

    raise StackError(
        "no HTTP client: an adapter gives its stages one when it builds its pipeline "
        "(or bind a stage yourself: stage.bind(StageServices(http=lambda: client)))"
    )


def _in_memory_store() -> ToolIdStore:
    from metis.pipeline.stores import InMemoryToolIdStore

    return InMemoryToolIdStore()


@dataclass(frozen=True, slots=True, kw_only=True)
class StageServices:
    """An adapter's settings and shared objects, as its stages receive them.

    Every field has a working default, so a stage can be bound for a test or a pipeline of
    its own with only what it uses: ``stage.bind(StageServices(http=lambda: client))``."""

    provider: str = "custom"
    """The adapter's name (its stack's)."""
    config: AdapterConfig = field(default_factory=AdapterConfig)
    """The adapter's settings: timeouts, retries, ``options``."""
    endpoint: Endpoint | None = None
    """Where requests go and the headers they carry; None for a pipeline with no endpoint."""
    http: Callable[[], httpx.AsyncClient] = no_client
    """The adapter's HTTP client (made on first use; the same client every time). Without
    one, asking for it is a StackError: a stage never makes a client of its own."""
    tool_ids: ToolIdStore = field(default_factory=_in_memory_store)
    """The session store that maps canonical tool ids to the provider's."""
    telemetry: TelemetrySink = NULL_SINK
    """Where the bus events of each call go."""
    capabilities_for: Callable[[str], AdapterCapabilities] = lambda _wire_model: (
        AdapterCapabilities()
    )
    """What a model (by its wire name) can serve through this adapter."""
    token_profile_for: Callable[[str], TokenProfile] = lambda _wire_model: DEFAULT_PROFILE
    """How the provider counts a model's input tokens (the stack's ``token_estimate``)."""
    settings: ProviderSettings = field(default_factory=NoSettings)
    """The adapter's typed settings, of its stack's kind (metis.pipeline.settings)."""
    option_keys: frozenset[str] = frozenset()
    """The names a request's provider options reach this adapter by besides its own: the
    stacks it extends and its catalog id (docs/contract.md §13)."""

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values no error, log line or telemetry event may show (the endpoint's)."""
        return self.endpoint.secrets if self.endpoint is not None else ()

    def require_endpoint(self, stage: str) -> Endpoint:
        """The endpoint, for a stage that cannot work without one."""
        if self.endpoint is None:
            from metis.errors import StackError

            raise StackError(f"stage {stage!r} needs an endpoint: bind it to an adapter's services")
        return self.endpoint
