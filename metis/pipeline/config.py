"""Adapter configuration (docs/contract.md §1)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metis.core.deprecation import warn_deprecated
from metis.core.options import checked_init
from metis.core.secrets import is_secret_header, scrub_url
from metis.errors import ConfigError
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.settings import ProviderSettings
from metis.transport.clients import AsyncHTTPClient


@checked_init
class AdapterConfig(BaseModel):
    """How one adapter reaches its provider.

    ``http_client`` lets tests and applications inject an ``httpx.AsyncClient`` or an
    ``httpx2.AsyncClient`` (respx, a ``MockTransport``, a proxy, pool limits); when it is None
    the adapter makes and owns one (docs/http-client.md).
    ``capabilities`` overrides what the stack declares, field by field.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None
    timeout_seconds: float = Field(default=600.0, gt=0, strict=True)
    max_retries: int = Field(default=2, ge=0, strict=True)
    extra_headers: dict[str, str] = {}
    settings: dict[str, Any] | ProviderSettings | None = None
    """The provider's own settings, of the kind its stack names (``region`` for Bedrock,
    ``project`` for Vertex, ...; metis.pipeline.settings), validated when the adapter is built."""
    options: dict[str, Any] = {}
    """Deprecated: :attr:`settings`."""
    capabilities: dict[str, Any] = {}
    http_client: AsyncHTTPClient | None = Field(default=None, repr=False)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name == "base_url" and value:
                value = scrub_url(value)
            elif name == "extra_headers" and value:
                value = {k: "[REDACTED]" if is_secret_header(k) else v for k, v in value.items()}
            yield name, value

    def given_settings(self) -> dict[str, Any] | ProviderSettings:
        """:attr:`settings`, or the deprecated :attr:`options` when only they are given."""
        if self.settings is not None:
            if self.options:
                raise ConfigError("AdapterConfig: give settings or options (deprecated), not both")
            return self.settings
        if self.options:
            warn_deprecated("AdapterConfig(options=...)", "AdapterConfig(settings=...)")
        return dict(self.options)

    def merged_capabilities(self, declared: AdapterCapabilities) -> AdapterCapabilities:
        """The stack's ``declared`` capabilities with this config's ``capabilities`` over
        them."""
        if not self.capabilities:
            return declared
        return AdapterCapabilities.model_validate({**declared.model_dump(), **self.capabilities})


def with_given(config: AdapterConfig | None, **given: Any) -> AdapterConfig | None:
    """``config`` with each keyword given (not None) set over its field; ``config`` itself
    when none is given (the one-line form of ``build_adapter``'s keywords)."""
    if config is not None and not isinstance(config, AdapterConfig):
        raise ConfigError(f"config: expected an AdapterConfig, got {type(config).__name__}")
    chosen = {name: value for name, value in given.items() if value is not None}
    if not chosen:
        return config
    return checked_config("build_adapter()", **{**(dict(config) if config else {}), **chosen})


def checked_config(
    source: str, error: type[Exception] = ConfigError, **fields: Any
) -> AdapterConfig:
    """An AdapterConfig of ``fields``, given by a caller as keywords or options: a wrong
    value is ``error`` naming ``source`` (a ConfigError) or the option alone (another class:
    a one-line call's InvalidRequestError, as its other options), not pydantic's error."""
    try:
        return AdapterConfig(**fields)
    except ValidationError as exc:
        from metis.core.config_files import config_error

        found = config_error(exc, source, AdapterConfig)
        if error is ConfigError:
            raise found from None
        raise error(str(found).removeprefix(f"{source}: ")) from None
