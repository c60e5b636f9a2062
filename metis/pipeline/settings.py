"""Typed settings of a provider stack: what an adapter of that stack may be told.

A stack names its kind (``settings: bedrock``); an adapter's settings (``build_adapter(...,
settings={...})``, ``AdapterConfig.settings``, the one-line calls' ``settings=``) are
validated against it when the adapter is built, unknown keys refused with the nearest valid
one named. Each kind is a pydantic model, so code may also pass an instance
(``BedrockSettings(region="eu-west-1")``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from metis.core.suggest import closest
from metis.errors import ConfigError

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""A region, project, location or resource: it goes into a URL's host or path, so nothing
that could change the URL's shape (``/``, ``?``, ``#``, ``@``, a space)."""


REGION_GRAMMAR = re.compile(r"[a-z]{2,8}(?:-[a-z]+){1,3}-[0-9]{1,2}")
"""An AWS region's name: a partition prefix, one to three words and a number (``us-east-1``,
``us-gov-west-1``, ``us-isob-east-1``, ``eusc-de-east-1``). A region goes into the host name
of the request, so nothing else may: a ``#``, ``/``, ``?`` or ``@`` would send the signed
request to another host."""


def checked_region(name: str, source: str) -> str:
    """``name`` if it is an AWS region's name; else a ConfigError saying where it came from."""
    if REGION_GRAMMAR.fullmatch(name):
        return name
    raise ConfigError(
        f"{source} {name[:64]!r} is not an AWS region name (lower-case words and a number "
        "joined by '-', like us-east-1)"
    )


class ProviderSettings(BaseModel):
    """The base of a provider's settings (``settings={"region": ...}``), one model per kind
    a stack names (``settings: bedrock``): frozen, unknown keys refused. Subclass it and
    :func:`register_settings` it for a stack of your own."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, defer_build=True
    )

    def value(self, name: str) -> Any:
        """The setting ``name`` if this kind has it and it is set, else None."""
        return getattr(self, name, None)

    def as_mapping(self) -> Mapping[str, Any]:
        """The settings given (not the defaults), by name, for a stage that looks them up."""
        return MappingProxyType({name: getattr(self, name) for name in self.model_fields_set})


class NoSettings(ProviderSettings):
    """A stack whose adapters take no settings beyond AdapterConfig's."""


class BedrockSettings(ProviderSettings):
    """AWS Bedrock: where and as whom (docs/cloud.md)."""

    region: str | None = None
    """The AWS region; else AWS_REGION, AWS_DEFAULT_REGION or the profile's."""
    profile: str | None = None
    """The AWS profile to sign with; else AWS_PROFILE."""

    @field_validator("region")
    @classmethod
    def _region_name(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                checked_region(value, "the region setting")
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value


def google_credentials_like(value: object) -> bool:
    """Whether ``value`` has what google-auth credentials have, looked up without running a
    property (``valid`` compares the expiry, and raises for one with a time zone)."""
    return all(
        inspect.getattr_static(value, name, _MISSING) is not _MISSING
        for name in ("valid", "token", "refresh")
    )


_MISSING = object()


class VertexSettings(ProviderSettings):
    """Google Vertex AI (docs/cloud.md)."""

    project: str | None = Field(default=None, pattern=_NAME)
    location: str | None = Field(default=None, pattern=_NAME)
    credentials: Any = Field(
        default=None, validation_alias=AliasChoices("credentials", "google_credentials")
    )
    """google-auth credentials (``google.auth.credentials.Credentials``); else Application
    Default Credentials."""

    @field_validator("credentials")
    @classmethod
    def _google_auth(cls, value: Any) -> Any:
        if value is not None and not google_credentials_like(value):
            raise ValueError(
                "must be google-auth credentials (google.auth.credentials.Credentials), "
                f"got {type(value).__name__}"
            )
        return value


class AzureSettings(ProviderSettings):
    """Azure OpenAI (docs/cloud.md)."""

    resource: str | None = Field(default=None, pattern=_NAME)
    token_provider: Callable[[], Any] | None = Field(
        default=None, validation_alias=AliasChoices("token_provider", "azure_ad_token_provider")
    )
    """A callable returning an Entra ID token, plain or async (azure-identity's
    ``get_bearer_token_provider(...)``); else DefaultAzureCredential."""


class OllamaSettings(ProviderSettings):
    """A local Ollama server (docs/stacks.md)."""

    model: str | None = None
    """The model ``adapter.init()`` checks, preloads and ``dispose()`` unloads."""
    keep_alive: str | float | None = None
    num_ctx: int | None = Field(default=None, gt=0)
    """The context window to ask for; unset, the model's declared window; None, the server's
    default."""
    think: bool | Literal["low", "medium", "high", "budget"] | None = None
    model_options: dict[str, Any] = {}
    """More Ollama ``options`` for every request (``seed``, ``top_k``, ...)."""


KINDS: dict[str, type[ProviderSettings]] = {
    "none": NoSettings,
    "bedrock": BedrockSettings,
    "vertex": VertexSettings,
    "azure": AzureSettings,
    "ollama": OllamaSettings,
}


def register_settings(kind: str, model: type[ProviderSettings]) -> type[ProviderSettings]:
    """Make ``model`` the settings of stacks that say ``settings: <kind>`` (a stack of your
    own whose stages read settings of their own)."""
    if not (isinstance(model, type) and issubclass(model, ProviderSettings)):
        raise ConfigError(f"settings kind {kind!r}: {model!r} is not a ProviderSettings model")
    KINDS[kind] = model
    return model


def settings_kind(kind: str, where: str = "") -> type[ProviderSettings]:
    found = KINDS.get(kind)
    if found is None:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}settings: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return found


def names_a_model(kind: str) -> bool:
    """Whether the settings of this kind name a model (Ollama's: the one ``init()`` asks the
    server about)."""
    return "model" in settings_kind(kind).model_fields


def with_model(kind: str, settings: Any, model: str | None) -> Any:
    """``settings`` with a call's ``model`` where settings of this kind name a model and these
    do not: Ollama's ``init()`` then asks the server what that model can do (its tools, images
    and thinking), which the stack's defaults do not claim. Settings that are no mapping are
    left for their check to refuse."""
    if model is None or not names_a_model(kind):
        return settings
    if settings is not None and (not isinstance(settings, Mapping) or "model" in settings):
        return settings
    return {**(settings or {}), "model": model}


def setting_named(name: str) -> str | None:
    """The provider setting (of any kind) ``name`` stands for, exactly or misspelt: what a
    keyword given beside a call's options rather than in its ``settings=`` most likely is."""
    known = sorted({key for model in KINDS.values() for key in _keys(model)})
    if name in known:
        return name
    close = closest(name, known, n=1, cutoff=0.8)
    return close[0] if close else None


def validate_settings(
    kind: str, given: ProviderSettings | Mapping[str, Any] | None, where: str
) -> ProviderSettings:
    """``given`` as the stack's kind of settings, or a ConfigError naming what is wrong (an
    unknown key with the nearest valid one)."""
    model = settings_kind(kind)
    if isinstance(given, ProviderSettings):
        if isinstance(given, model):
            return given
        raise ConfigError(
            f"{where}: takes {model.__name__}, not {type(given).__name__} (settings kind {kind!r})"
        )
    try:
        return model.model_validate(dict(given or {}))
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_explain(model, exc)}") from None


def _explain(model: type[ProviderSettings], exc: ValidationError) -> str:
    known = _keys(model)
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "settings"
        if err["type"] == "extra_forbidden":
            near = closest(key, known, n=1, cutoff=0.5)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"unknown setting {key!r}{hint}")
        else:
            problems.append(f"setting {key!r}: {err['msg']}")
    listed = ", ".join(known) or "none"
    return f"{'; '.join(problems)} (its settings: {listed})"


def _keys(model: type[ProviderSettings]) -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        keys.append(name)
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            keys.extend(str(a) for a in alias.choices if a != name)
    return keys
