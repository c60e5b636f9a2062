"""The ``gateway:`` section of a models.yaml (docs/gateway.md): where to listen, the key a
client must give, and the limits of each request."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metis.core.config_files import config_error, read_yaml
from metis.core.suggest import did_you_mean
from metis.errors import ConfigError
from metis.gateway.keys import Keys, KeySpec
from metis.gateway.unpriced import unpriced
from metis.gateway.upstream_pool import upstream_client
from metis.registry.file import RegistryFile
from metis.registry.registry import Registry

log = logging.getLogger("metis.gateway")


class MetricsSettings(BaseModel):
    """``gateway.metrics``: ``api_key_env`` names the variable holding the key a scrape of
    ``/metrics`` must send (``Authorization: Bearer``, as Prometheus sends it, or
    ``x-api-key``); without it ``/metrics`` is open."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_key_env: str | None = Field(default=None, min_length=1)


class GatewaySettings(BaseModel):
    """``gateway:`` in a models.yaml. ``api_key_env`` names the variable holding the one key
    clients must send (``x-api-key`` or ``Authorization: Bearer``); without it the gateway
    takes any client and listens on loopback only unless told otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=4000, ge=0, le=65535)
    api_key_env: str | None = Field(default=None, min_length=1)
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    request_timeout_seconds: float = Field(default=600.0, gt=0)
    drain_seconds: int = Field(default=30, ge=0)
    """How long shutting down waits for the streams in flight to finish."""
    keep_alive_seconds: int = Field(default=5, ge=1)
    """How long ``metis serve`` keeps a client's idle connection open (uvicorn's
    ``timeout_keep_alive``): longer than a load balancer's idle timeout in front of it."""
    stored_responses: int = Field(default=10_000, ge=0)
    """How many Responses API conversations are kept for ``previous_response_id``."""
    redis_url: str | None = None
    """Where the keys' limits and spend, and the stored responses, are shared by every
    gateway (else: in memory)."""
    stored_seconds: int = Field(default=30 * 86400, ge=1)
    """How long a stored response is kept in Redis."""
    opentelemetry: bool = False
    """A SERVER span per request, the library's client spans under it (metis.gateway.tracing;
    the global tracer provider's, ``pip install 'metis[otel]'``)."""
    pass_through: bool = True
    """Whether a request whose API is the routed model's own goes through as it came
    (metis.gateway.passthrough); off: every request is translated."""
    access_log: bool = True
    """A line per request as it ends, at INFO through the ``metis.gateway`` logger
    (metis.gateway.access); off: none, and nothing noted for it."""
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    cors_origins: list[str] = Field(default_factory=list)
    """The origins (``https://app.example``, or ``*``) of the web pages that may call the
    gateway from a browser (CORS, metis.gateway.front); none: a browser may not."""
    keys: list[KeySpec] = Field(default_factory=list)
    """Gateway keys with their own models, limits and budget (metis.gateway.keys). Each name
    is its own: a key's spend, limits and Responses conversations are kept under it."""

    @field_validator("redis_url")
    @classmethod
    def _redis_url_parses(cls, url: str | None) -> str | None:
        """A Redis address that cannot be read is said as the file loads, not as a traceback
        when the server starts."""
        if url is not None:
            from importlib.util import find_spec

            from metis.redis.target import parse_redis_url

            parse_redis_url(url)
            if find_spec("coredis") is None:
                raise ValueError("a Redis needs the redis extra: pip install 'metis[redis]'")
        return url

    @field_validator("keys")
    @classmethod
    def _names_differ(cls, keys: list[KeySpec]) -> list[KeySpec]:
        names = [key.name for key in keys]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"two keys are named {', '.join(map(repr, twice))}")
        return keys


class GatewayConfig:
    """A models.yaml read for serving: the registry of its models, aliases and routes, the
    gateway's settings, and the client key they name (read from the environment)."""

    def __init__(
        self,
        registry: Registry,
        settings: GatewaySettings,
        api_key: str | None,
        keys: Keys,
        tracer: Any = None,
        metrics_key: str | None = None,
    ) -> None:
        self.registry, self.settings, self.api_key, self.keys = registry, settings, api_key, keys
        self.tracer = tracer
        """The server spans' tracer (None: no spans; ``gateway.opentelemetry``)."""
        self.metrics_key = metrics_key
        """The key a scrape of ``/metrics`` must send (None: open; ``gateway.metrics``)."""

    @classmethod
    def load(
        cls, path: str | Path, *, environ: Mapping[str, str] | None = None, **registry_kwargs: Any
    ) -> GatewayConfig:
        file = Path(path).expanduser()
        data = read_yaml(file, "gateway configuration")
        return cls.from_dict(
            data, str(file), base_dir=file.parent, environ=environ, **registry_kwargs
        )

    @classmethod
    def from_dict(
        cls,
        data: Any,
        source: str = "<inline>",
        *,
        environ: Mapping[str, str] | None = None,
        tracer_provider: Any = None,
        **registry_kwargs: Any,
    ) -> GatewayConfig:
        """``tracer_provider``: the spans' provider when ``gateway.opentelemetry`` is on (else
        the global one)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping with adapters, models and gateway")
        known = [*RegistryFile.model_fields, "gateway"]
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"{source}: {key}: unknown key; expected one of: {', '.join(known)}"
                    + did_you_mean(str(key), known)
                )
        data = dict(data)
        settings = _settings(data.pop("gateway", None) or {}, source)
        env = os.environ if environ is None else environ
        api_key = _key_of(env, settings.api_key_env, "api_key_env", "clients", source)
        scrapes = settings.metrics.api_key_env
        metrics_key = _key_of(env, scrapes, "metrics.api_key_env", "scrapes of /metrics", source)
        try:
            keys = Keys(settings.keys, env, simple=api_key)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        tracer = None
        if settings.opentelemetry:
            from metis.gateway.tracing import tracer_for
            from metis.telemetry.otel import OpenTelemetrySink

            try:
                tracer = tracer_for(tracer_provider)
                registry_kwargs.setdefault("telemetry", OpenTelemetrySink(tracer_provider))
            except ImportError:  # as a redis_url without the redis extra
                raise ConfigError(
                    f"{source}: gateway.opentelemetry: spans need the OpenTelemetry API: pip "
                    "install 'metis[otel]'"
                ) from None
        registry_kwargs.setdefault("make_client", upstream_client)
        registry = Registry.from_dict(data, source, environ=environ, **registry_kwargs)
        _check_key_models(settings.keys, registry, source)
        for line in unpriced(settings.keys, registry):
            log.warning("%s: %s", source, line, extra={"event": "metis.gateway.unpriced"})
        return cls(registry, settings, api_key, keys, tracer, metrics_key)


def read_settings(path: str | Path) -> GatewaySettings:
    """The ``gateway:`` section of the file at ``path`` alone, validated as a served file's
    is, without reading its keys' variables or building its models (``metis keys``: a key's
    spend is kept under its name)."""
    file = Path(path).expanduser()
    data = read_yaml(file, "gateway configuration")
    raw = data.get("gateway") if isinstance(data, dict) else None
    return _settings(raw or {}, str(file))


def _settings(raw: Any, source: str) -> GatewaySettings:
    _check_keys(raw, source)
    try:
        return GatewaySettings.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, source, GatewaySettings, ("gateway",)) from None


def _check_keys(raw: Any, source: str) -> None:
    """Each entry of ``gateway.keys`` validated alone, so its errors name it as every other
    error of the section does: by its name, or by its place where it has none."""
    entries = raw.get("keys") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        return  # not a list: the section's own validation says so
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        where = name if isinstance(name, str) and name else i
        try:
            KeySpec.model_validate(entry)
        except ValidationError as exc:
            raise config_error(exc, source, KeySpec, ("gateway", "keys", where)) from None


def _key_of(
    env: Mapping[str, str], variable: str | None, where: str, sender: str, source: str
) -> str | None:
    """The key ``variable`` (named by ``gateway.<where>``) holds; None when none is named."""
    if variable is None:
        return None
    key = env.get(variable)
    if not key:
        raise ConfigError(
            f"{source}: gateway.{where} names {variable}, which is not set; set it to the key "
            f"{sender} must send"
        )
    return key


def _check_key_models(specs: list[KeySpec], registry: Registry, source: str) -> None:
    """Each name a key may give is a model, alias or route of the file: a misspelt one would
    only ever answer that key 403."""
    served = [
        *(name for route in registry.routes() for name in (route.model, *route.aliases)),
        *registry.route_specs,
    ]
    for spec in specs:
        for name in spec.models or ():
            if name not in served:
                raise ConfigError(
                    f"{source}: gateway.keys.{spec.name}.models: {name!r} is not a model, alias "
                    "or route of this file" + did_you_mean(name, served)
                )
