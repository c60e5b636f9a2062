"""Embedding stacks: an embedding provider declared in YAML (docs/embeddings.md).

An embedding call is not a conversation, so its stack is not a chat stack: no canonical
stages, no stream, no events. It shares what applies: the endpoint and auth keys of a chat
stack, the auth steps of every platform (``url_params``, ``aws_endpoint``, ``aws_sigv4``,
``google_auth``, ``azure_auth``), and the skeleton's ``retry``, ``telemetry`` and
``transport``, which the embedder runs around each request. A stack says only its endpoint,
its key, its codec (``metis.wire.embeddings``), its limits and its auth steps::

    name: vertex
    extends: gemini                     # a built-in embedding stack, or a path
    settings: vertex
    endpoint:
      base_url: "https://{location}-aiplatform.googleapis.com"
      path: /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:predict
    codec: vertex
    stages: [url_params: {params: ...}, google_auth]

``extends`` merges ``endpoint``, ``auth``, ``headers`` and ``limits`` key by key (``null``
removes one); every other key replaces the parent's.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metis.core.config_files import MAX_CONFIG_BYTES, config_error, decode_text, parse_yaml
from metis.core.suggest import did_you_mean
from metis.errors import ConfigError, StackError
from metis.pipeline.registry import StageRegistry
from metis.pipeline.registry import stages as default_registry
from metis.pipeline.settings import settings_kind
from metis.pipeline.stage import Stage
from metis.stacks.loader import AuthSpec, EndpointSpec, StackSpec, StageEntry
from metis.wire.embeddings import CODECS

AUTH_STEPS = ("url_params", "aws_endpoint", "aws_sigv4", "google_auth", "azure_auth")
"""The stages an embedding stack may list: the auth flow of each platform."""
_MERGED = ("endpoint", "auth", "headers", "limits")


class EmbeddingLimits(BaseModel):
    """Per-request limits of the provider (a catalogued model may lower them) and how many
    requests of one call run at once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_inputs: int | None = Field(default=None, ge=1)
    max_request_tokens: int | None = Field(default=None, ge=1)
    max_input_tokens: int | None = Field(default=None, ge=1)
    """For a model the catalog does not know (None: not checked before sending)."""
    concurrency: int = Field(default=4, ge=1)


class EmbeddingStackSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    endpoint: EndpointSpec
    auth: AuthSpec = AuthSpec()
    headers: dict[str, str] = {}
    catalog: str | None = None
    codec: str
    settings: str = "none"
    limits: EmbeddingLimits = EmbeddingLimits()
    stages: list[StageEntry] = []
    source: str = "<inline>"

    @field_validator("settings")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        settings_kind(value)
        return value

    @field_validator("codec")
    @classmethod
    def _known_codec(cls, value: str) -> str:
        if value not in CODECS:
            raise ValueError(f"no embedding codec {value!r}{did_you_mean(value, list(CODECS))}")
        return value

    @field_validator("stages", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        entries = StackSpec._entries(value)
        for entry in entries:
            name = entry["name"]
            if name not in AUTH_STEPS:
                raise ValueError(
                    f"{name!r}: an embedding stack lists only its auth steps "
                    f"({', '.join(AUTH_STEPS)}); retry, telemetry and transport are its skeleton"
                )
        return entries

    def build_auth_flow(
        self, registry: StageRegistry = default_registry
    ) -> list[Stage[Any, Any, Any, Any]]:
        """The stack's auth steps, built (unbound), in order."""
        built = []
        for i, entry in enumerate(self.stages):
            try:
                built.append(registry.build(entry.name, entry.options))
            except StackError as exc:
                raise StackError(f"{self.source}: stages[{i}]: {exc}") from None
        return built


def load_embedding_stack(name_or_path: str | Path) -> EmbeddingStackSpec:
    """A built-in embedding stack by provider name (``"openai"``) or a stack file by path."""
    data, source = _resolved(str(name_or_path), [])
    try:
        return EmbeddingStackSpec.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise config_error(exc, source, EmbeddingStackSpec) from None


@functools.cache
def embedding_catalog_provider(stack: str) -> str | None:
    """The catalog provider a built-in embedding stack or a stack file (``my/stack.yaml``, as
    ``metis.embed`` names it) names, or None."""
    is_file = stack.endswith((".yaml", ".yml")) and Path(stack).is_file()
    if stack not in builtin_embedding_stacks() and not is_file:
        return None
    try:
        return load_embedding_stack(stack).catalog
    except ConfigError:  # a chat stack's file, or a broken one: nothing to price it by
        return None


def builtin_embedding_stacks() -> list[str]:
    folder = resources.files("metis.stacks.embeddings")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _resolved(name: str, seen: list[str]) -> tuple[dict[str, Any], str]:
    data, source = _load(name, seen[-1] if seen else None)
    if source in seen:
        raise StackError(
            f"embedding stacks extend each other in a cycle: {' -> '.join([*seen, source])}"
        )
    parent_name = data.pop("extends", None)
    if parent_name is None:
        return data, source
    if not isinstance(parent_name, str):
        raise ConfigError(f"{source}: extends: expected a stack name or path, got {parent_name!r}")
    parent, _ = _resolved(parent_name, [*seen, source])
    merged = {**parent, **data}
    for key in _MERGED:
        if isinstance(parent.get(key), dict) and isinstance(data.get(key), dict):
            both = {**parent[key], **data[key]}
            merged[key] = {k: v for k, v in both.items() if v is not None}
    return merged, source


def _load(name: str, relative_to: str | None) -> tuple[dict[str, Any], str]:
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.parent != Path("."):
        if (
            relative_to is not None
            and not path.is_absolute()
            and not relative_to.startswith("metis/")
        ):
            path = Path(relative_to).parent / path
        try:
            if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
                raise ConfigError(f"stack file {path} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
            text, source = decode_text(path.read_bytes(), str(path)), str(path)
        except OSError as exc:
            raise ConfigError(f"cannot read embedding stack file {path}: {exc.strerror}") from None
    else:
        resource = resources.files("metis.stacks.embeddings") / f"{name}.yaml"
        if not resource.is_file():
            known = builtin_embedding_stacks()
            raise ConfigError(
                f"no built-in embedding stack named {name!r}{did_you_mean(name, known)} "
                f"(embedding stacks: {', '.join(known)})"
            )
        text, source = resource.read_text(encoding="utf-8"), f"metis/stacks/embeddings/{name}.yaml"
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with name, endpoint and codec")
    return data, source
