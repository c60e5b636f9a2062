"""Provider stacks declared in YAML: endpoint, auth, headers, capabilities and stages.

A stack file (``metis/stacks/builtin/<name>.yaml`` or any path) looks like::

    name: anthropic
    endpoint: {base_url: https://api.anthropic.com, path: /v1/messages}
    auth: {header: x-api-key, env: ANTHROPIC_API_KEY}
    headers: {anthropic-version: "2023-06-01"}
    capabilities: {supports_tools: true, ...}
    catalog: anthropic             # the model catalog's provider id (docs/catalog.md)
    token_estimate: {text_counting: pieces, ...}   # metis.catalog.estimate.TokenProfile
    stages:                    # outermost first
      - invariants
      - encode: {codec: anthropic}
      - transport

Each stage entry is a registered stage name, alone or mapped to its options.
"""

from __future__ import annotations

import copy
import functools
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from metis.catalog.token_profile import DEFAULT_PROFILE, TokenProfile
from metis.core.config_files import MAX_CONFIG_BYTES, config_error, decode_text, parse_yaml
from metis.core.suggest import did_you_mean
from metis.errors import ConfigError, StackError, redact
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.endpoint import Endpoint, sdk_root_path, without_overlap
from metis.pipeline.registry import StageRegistry
from metis.pipeline.registry import stages as default_registry
from metis.pipeline.settings import settings_kind
from metis.stacks.assembly import checked, completed_root
from metis.stacks.deferred import packaged_settings
from metis.stacks.dialect import apply_dialect
from metis.stacks.extends import resolve

if TYPE_CHECKING:
    from metis.pipeline.pipeline import Pipeline


class EndpointSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    path: str
    stream_path: str | None = None
    base_url_env: str | None = None
    """The variable the provider's own SDK reads a base URL from (``ANTHROPIC_BASE_URL``):
    when set, it replaces ``base_url`` (an explicit ``AdapterConfig.base_url`` wins over both)."""
    base_url_env_host: bool = False
    """The variable may name a host instead of a URL, as ``OLLAMA_HOST`` does (``host``,
    ``host:port``, ``:port``): what it leaves out comes from ``base_url``."""
    versioned_base_url: bool = False
    """A base URL naming an API version in its path is the API's root, as OpenAI's SDKs take
    it: Gemini's ``.../v1beta/openai`` gets ``/chat/completions``, not ``/v1/chat/completions``
    (:func:`metis.pipeline.endpoint.sdk_root_path`)."""

    def env_base_url(self) -> str | None:
        """The base URL ``base_url_env`` gives, None when it is unset or empty."""
        given = os.environ.get(self.base_url_env, "").strip() if self.base_url_env else ""
        if not given or not self.base_url_env_host or "://" in given:
            return given or None
        return _host_url(given, self.base_url, str(self.base_url_env))


def _host_url(given: str, default: str, variable: str) -> str:
    """``given`` (a host with or without a port, or ``:port``, maybe a path after it) as a URL,
    the scheme, and the host or port it leaves out, from ``default``."""
    base, parts = urlsplit(default), _parts("//" + given)
    try:
        port = parts.port if parts is not None else -1
    except ValueError:
        port = -1
    if parts is None or port == -1 or parts.query or parts.fragment or "@" in parts.netloc:
        raise ConfigError(f"{variable}: expected host[:port] or a URL, got {redact(given)!r}")
    host = parts.netloc.rstrip(":")
    if port is not None:
        host = host[: host.rfind(":")]
    port = port if port is not None else base.port
    return f"{base.scheme}://{host or base.hostname}{f':{port}' if port else ''}{parts.path}"


def _parts(url: str) -> SplitResult | None:
    """``url`` split; None when it is none: no ``//``, or a ``[`` that opens no IPv6 host
    (urlsplit's ValueError)."""
    if "//" not in url:
        return None
    try:
        return urlsplit(url)
    except ValueError:
        return None


class AuthSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    header: str | None = None
    scheme: str | None = None
    env: str | None = None
    optional: bool = False
    """The key is sent when there is one, and the provider works without (a local server)."""


class StageEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    options: dict[str, Any] = {}


class StackSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    endpoint: EndpointSpec
    auth: AuthSpec = AuthSpec()
    headers: dict[str, str] = {}
    capabilities: AdapterCapabilities = AdapterCapabilities()
    catalog: str | None = None
    """The model catalog's provider id for this stack's models (``anthropic``, ``google``,
    ``amazon-bedrock``): each model's limits and capabilities narrow ``capabilities``. None for
    a stack whose models the catalog cannot know (a local server)."""
    token_estimate: TokenProfile = DEFAULT_PROFILE
    """How this provider counts input tokens, for the pre-flight estimate."""
    codec: str | None = None
    """The wire dialect, named once: every stage that needs it takes it from here."""
    codec_settings: dict[str, Any] | None = None
    """The settings of a codec configured by its stack (the schema-driven one)."""
    framing: Literal["sse", "ndjson", "json", "eventstream"] | None = None
    """How the answer's body is cut into objects (``decode``'s format), named once."""
    settings: str = "none"
    """The kind of settings an adapter of this stack takes (metis.pipeline.settings:
    ``bedrock``, ``vertex``, ``azure``, ``ollama``), validated when the adapter is built."""

    @field_validator("settings")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        settings_kind(value)
        return value

    stages: list[StageEntry]
    source: str = "<inline>"
    stage_sources: dict[str, str] = {}
    """For each stage, the file that set it (a stack that ``extends`` another inherits some)."""

    @field_validator("stages", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("must be a list of stage names or {name: options} mappings")
        entries: list[dict[str, Any]] = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                entries.append({"name": item})
            elif isinstance(item, dict) and "name" in item and set(item) <= {"name", "options"}:
                entries.append(item)  # already in this form
            elif isinstance(item, dict) and len(item) == 1:
                ((name, options),) = item.items()
                if options is not None and not isinstance(options, dict):
                    raise ValueError(f"stages[{i}] ({name}): options must be a mapping")
                entries.append({"name": name, "options": options or {}})
            else:
                raise ValueError(f"stages[{i}] must be a name or a one-key mapping, got {item!r}")
        return entries

    def build_pipeline(self, registry: StageRegistry = default_registry) -> Pipeline:
        from metis.pipeline.pipeline import Pipeline  # the engine loads with the first pipeline

        built = []
        for i, entry in enumerate(self.stages):
            try:
                built.append(registry.build(entry.name, entry.options))
            except StackError as exc:
                raise StackError(f"{self.source}: stages[{i}]: {exc}") from None
        try:
            return Pipeline(built, name=self.name)
        except StackError as exc:
            raise StackError(f"{self.source}: {exc}") from None


class EndpointSource(Protocol):
    """What :func:`endpoint_for` reads of a stack (a chat or an embedding stack)."""

    @property
    def endpoint(self) -> EndpointSpec: ...
    @property
    def auth(self) -> AuthSpec: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def source(self) -> str: ...


def endpoint_for(
    spec: EndpointSource,
    *,
    api_key: str | None,
    base_url: str | None,
    extra_headers: dict[str, str],
) -> Endpoint:
    """Where an adapter of ``spec`` sends: the key given, else the stack's variable's; the base
    URL given, else the SDK's variable the stack names, else the provider's own."""
    key = api_key or (os.environ.get(spec.auth.env) if spec.auth.env else None)
    env = spec.endpoint.base_url_env
    from_env = spec.endpoint.env_base_url()
    url = base_url or from_env or spec.endpoint.base_url
    parts = _parts(url) if "://" in url else None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        where = "base_url" if base_url else env if from_env else f"{spec.source}: base_url"
        raise ConfigError(
            f"{where}: expected a URL with its scheme (https://host...), http:// or https:// "
            f"and a host, got {redact(url)!r}"
        )
    path, stream_path = spec.endpoint.path, spec.endpoint.stream_path
    if spec.endpoint.versioned_base_url:
        path = sdk_root_path(url, path)
        stream_path = stream_path and sdk_root_path(url, stream_path)
    return Endpoint(
        base_url=without_overlap(url, path),
        path=path,
        stream_path=stream_path,
        headers={**spec.headers, **extra_headers},
        api_key=key,
        auth_header=spec.auth.header,
        auth_scheme=spec.auth.scheme,
    )


def load_stack(name_or_path: str | Path, registry: StageRegistry = default_registry) -> StackSpec:
    """A built-in stack by provider name (``"anthropic"``) or a stack file by path."""
    data, source = _load(str(name_or_path), None)
    return parse_stack(data, source, registry)


def parse_stack(
    data: dict[str, Any], source: str = "<inline>", registry: StageRegistry = default_registry
) -> StackSpec:
    """A stack from its parsed YAML: its ``extends`` chain resolved, its codec handed to the
    stages that need it (docs/stacks.md)."""
    root_hook = functools.partial(completed_root, registry=registry)
    if "extends" in data:
        data, origin = resolve(data, source, _load, root_hook)
    else:
        data, origin = root_hook(data, source)
    if isinstance(data.get("stages"), list):
        try:
            entries = StackSpec._entries(data["stages"])
        except ValueError as exc:
            raise ConfigError(f"{source}: stages: {exc}") from None
        entries = apply_dialect({**data, "stages": entries}, source, registry)
        data = {**data, "stages": checked(data, entries, source, registry)}
    try:
        return StackSpec.model_validate({**data, "source": source, "stage_sources": origin})
    except ValidationError as exc:
        raise config_error(exc, source, StackSpec) from None


def _load(name_or_path: str, relative_to: str | None) -> tuple[dict[str, Any], str]:
    """A stack file's data and source. A parent named by path is found beside its child."""
    path = Path(name_or_path)
    if relative_to is not None and _is_path(path) and not path.is_absolute():
        parent = Path(relative_to).parent
        if not relative_to.startswith("metis/stacks/builtin/"):
            path = parent / path
    if _is_path(path):
        data, source = _parsed(*_read(path))
    else:
        data, source = copy.deepcopy(_parsed_builtin(name_or_path))
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with name, endpoint and stages")
    return data, source


def _parsed(text: str, source: str) -> tuple[Any, str]:
    return parse_yaml(text, source), source


@functools.cache
def _parsed_builtin(name: str) -> tuple[Any, str]:
    """A built-in stack file, parsed once: it is package data, and every adapter built on the
    stack (or on one extending it) would otherwise parse it again. Callers get a deep copy."""
    data, source = _parsed(*_read(name))
    if isinstance(data, dict):
        packaged_settings(data.get("codec"), data.get("codec_settings"))
    return data, source


def builtin_stacks() -> list[str]:
    """The built-in stacks' names, sorted (a new list each call)."""
    return list(_builtin_stack_names())


@functools.cache
def _builtin_stack_names() -> tuple[str, ...]:
    """The package's stack files, listed once: like their contents (``_parsed_builtin``), they
    are package data, and every adapter built looks them up (the prefixes it refuses)."""
    folder = resources.files("metis.stacks.builtin")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


def _is_path(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") or path.parent != Path(".")


def _read(name_or_path: str | Path) -> tuple[str, str]:
    path = Path(name_or_path)
    if _is_path(path):
        try:
            if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
                raise ConfigError(f"stack file {path} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read stack file {path}: {exc.strerror}") from None
        return decode_text(data, str(path)), str(path)
    resource = resources.files("metis.stacks.builtin") / f"{name_or_path}.yaml"
    if not resource.is_file():
        raise _unknown_stack(str(name_or_path))
    return resource.read_text(encoding="utf-8"), f"metis/stacks/builtin/{name_or_path}.yaml"


def _unknown_stack(name: str) -> ConfigError:
    """No built-in stack is ``name``: the stacks serving it when it is a model catalog's
    provider id (``google`` is served by ``gemini``), else the nearest names."""
    known = builtin_stacks()
    serving = [stack for stack in known if _catalog_of(stack) == name]
    if serving:
        which = "the stack" if len(serving) == 1 else "the stacks"
        hint = (
            f"; {name!r} is a provider id of the model catalog, not a stack: its models are "
            f"served by {which} {', '.join(repr(stack) for stack in serving)} "
            f"(write {serving[0]}:MODEL)"
        )
    else:
        meant = stacks_meant(name, known)
        hint = f"; did you mean {' or '.join(map(repr, meant))}?" if meant else ""
        hint = hint or did_you_mean(name, known)
    return ConfigError(
        f"no built-in stack named {name!r}{hint} (built-in stacks: {', '.join(known)})"
    )


def stacks_meant(name: str, known: list[str]) -> list[str]:
    """The stacks a provider name written another way names: its words that are stacks
    (``azure-openai``: azure, openai; LiteLLM's ``vertex_ai``: vertex), else none."""
    words = name.lower().replace("-", "_").split("_")
    return [word for word in dict.fromkeys(words) if word in known]


@functools.cache
def _catalog_of(stack: str) -> str | None:
    try:
        return load_stack(stack).catalog
    except ConfigError:
        return None
