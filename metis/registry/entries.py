"""A models.yaml's entries resolved: an adapter entry's stack, key and status; a model
entry's route, with its capabilities narrowed by the model catalog and its own overrides."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from metis.catalog import default_catalog
from metis.catalog.capabilities import model_capabilities
from metis.core.config_files import config_error
from metis.core.suggest import did_you_mean
from metis.errors import ConfigError
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.settings import validate_settings
from metis.registry.file import AdapterEntry, ModelEntry
from metis.stacks.loader import StackSpec, builtin_stacks, load_stack

log = logging.getLogger("metis")


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """Where a model name leads: the canonical id, its adapter, and what it can serve."""

    model: str
    adapter_name: str
    wire_name: str
    tier: str | None
    can_delegate: bool
    aliases: tuple[str, ...]
    capabilities: AdapterCapabilities
    """The adapter stack's declared capabilities merged with the model's overrides."""
    stack_name: str

    @property
    def request_model(self) -> str:
        """The ``model`` to put in a CanonicalRequest for this route's adapter."""
        return f"{self.stack_name}:{self.wire_name}"


@dataclass(frozen=True, slots=True)
class AdapterStatus:
    name: str
    type: str
    status: Literal["configured", "not_configured"]
    reason: str | None = None
    api_key_env: str | None = None

    @property
    def configured(self) -> bool:
        return self.status == "configured"


@dataclass(frozen=True, slots=True)
class ResolvedAdapter:
    """An ``adapters:`` entry with its stack loaded and its key looked up."""

    name: str
    entry: AdapterEntry
    stack: StackSpec
    api_key: str | None
    api_key_env: str | None
    status: AdapterStatus


def resolve_adapter(
    name: str, entry: AdapterEntry, env: Mapping[str, str], base: Path | None, source: str
) -> ResolvedAdapter:
    """The entry's stack (a stack file relative to ``base``), and its key: ``api_key`` if
    given (with a WARNING), else the variable ``api_key_env`` or the stack names."""
    stack = _load_stack(name, entry.type, base, source)
    for field in ("settings", "options"):  # checked when the file loads, not at the first call
        if getattr(entry, field):
            validate_settings(
                stack.settings, getattr(entry, field), f"{source}: adapters.{name}.{field}"
            )
    key_env = entry.api_key_env or stack.auth.env
    if key_env != stack.auth.env:  # its adapters read this variable, never the stack's own
        stack = stack.model_copy(update={"auth": stack.auth.model_copy(update={"env": key_env})})
    if entry.api_key is not None:
        log.warning(
            "%s: adapter %r has its API key in plaintext (api_key); use api_key_env to "
            "name an environment variable instead",
            source,
            name,
            extra={"event": "metis.plaintext_api_key", "adapter": name},
        )
        key: str | None = entry.api_key
    else:
        key = env.get(key_env) if key_env else None
    needs_key = not stack.auth.optional and (key_env is not None or stack.auth.header is not None)
    if key or not needs_key:
        status = AdapterStatus(name, entry.type, "configured", api_key_env=key_env)
    else:
        if entry.api_key is not None:
            reason = "its api_key is empty"
        elif key_env:
            reason = f"environment variable {key_env} is not set"
        else:
            reason = "no api_key or api_key_env is given"
        status = AdapterStatus(name, entry.type, "not_configured", reason, key_env)
    return ResolvedAdapter(name, entry, stack, key or None, key_env, status)


def _load_stack(name: str, type_: str, base: Path | None, source: str) -> StackSpec:
    where = f"{source}: adapters.{name}.type"
    path = Path(type_).expanduser()
    is_path = path.suffix in (".yaml", ".yml") or path.parent != Path(".")
    if is_path and not path.is_absolute() and base is not None:
        path = base / path
    if not is_path:
        if type_ not in (known := builtin_stacks()):
            raise ConfigError(
                f"{where}: expected a built-in stack ({', '.join(known)}) or a "
                f"path to a stack file (.yaml), got {type_!r}{did_you_mean(type_, known)}"
            )
        return load_stack(type_)
    try:
        return load_stack(path)
    except ConfigError as exc:
        message = f"{where}: expected a usable stack file, got {type_!r}: {exc}"
        raise ConfigError(message) from None


def model_route(model_id: str, entry: ModelEntry, stack: StackSpec, source: str) -> ModelRoute:
    """The route for ``models: {model_id: entry}``, whose adapter entry uses ``stack``."""
    where = f"{source}: models.{model_id}"
    wire_name = entry.wire_name or model_id.partition(":")[2] or model_id
    declared_caps = _catalogued(stack, wire_name, entry.catalog, where)
    try:
        capabilities = AdapterCapabilities.model_validate(
            {**declared_caps.model_dump(), **entry.capabilities}
        )
    except ValidationError as exc:
        raise config_error(
            exc, source, AdapterCapabilities, ("models", model_id, "capabilities")
        ) from None
    return ModelRoute(
        model=model_id,
        adapter_name=entry.adapter,
        wire_name=wire_name,
        tier=entry.tier,
        can_delegate=entry.can_delegate,
        aliases=tuple(entry.aliases),
        capabilities=capabilities,
        stack_name=stack.name,
    )


def _catalogued(
    stack: StackSpec, wire_name: str, fields: dict[str, Any], where: str
) -> AdapterCapabilities:
    """The stack's capabilities narrowed by the model's catalog entry, after applying the
    entry's ``catalog:`` overrides to it."""
    if not stack.catalog:
        if fields:
            raise ConfigError(f"{where}.catalog: stack {stack.name} has no catalog provider")
        return stack.capabilities
    if fields:
        try:
            default_catalog().override(stack.catalog, wire_name, fields)
        except ConfigError as exc:
            raise ConfigError(f"{where}.catalog: {exc}") from None
    info = default_catalog().get(stack.catalog, wire_name)
    return model_capabilities(stack.capabilities, info) if info else stack.capabilities
