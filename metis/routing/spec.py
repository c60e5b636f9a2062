"""A route as written in models.yaml (``routes:``) or given in code.

::

    routes:
      default:
        models:
          - sonnet                                   # a model id or alias of this file
          - {model: openai:gpt-4o, max_retries: 0, options: {temperature: 0.2}}
        fallback_on: [overloaded, rate_limit, server_error, network]   # the default
        max_retries: 1          # each model's retries before moving on (default: none, and
                                # the last model that can be called keeps its adapter's own)
        limits:                 # per provider or per provider:model
          anthropic: {max_concurrent: 8, tokens_per_minute: 40000, on_limit: wait}
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from metis.core.suggest import did_you_mean
from metis.errors import ConfigError, ErrorClass
from metis.model.request import CanonicalRequest
from metis.routing.limits import Limits

DEFAULT_FALLBACK_ON = frozenset(
    {ErrorClass.OVERLOADED, ErrorClass.RATE_LIMIT, ErrorClass.SERVER_ERROR, ErrorClass.NETWORK}
)
"""The error classes that move a call on to the next model unless configured otherwise."""

_NOT_OPTIONS = frozenset({"model", "messages", "request_id", "session_id", "stream"})


class TargetSpec(BaseModel):
    """One model of a route."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    max_retries: int | None = Field(default=None, ge=0, strict=True)
    options: dict[str, Any] = {}
    """Request fields set for this model (``temperature``, ``max_output_tokens``, ``thinking``)."""

    @field_validator("options")
    @classmethod
    def _options_are_request_fields(cls, options: dict[str, Any]) -> dict[str, Any]:
        return validated_options(options)


class RouteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: list[str | TargetSpec] = Field(min_length=1)
    fallback_on: list[ErrorClass] = Field(default_factory=lambda: sorted(DEFAULT_FALLBACK_ON))
    max_retries: int | None = Field(default=None, ge=0, strict=True)
    limits: dict[str, Limits] = {}

    def targets(self) -> list[TargetSpec]:
        """Each of ``models`` as a ``TargetSpec`` (a bare name is one with no settings)."""
        return [TargetSpec(model=m) if isinstance(m, str) else m for m in self.models]


def error_classes(names: Iterable[ErrorClass | str]) -> frozenset[ErrorClass]:
    """``names`` as error classes; a ConfigError naming the known ones for a wrong one."""
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):
        hint = f"; give fallback_on=[{names!r:.60}]" if isinstance(names, str) else ""
        raise ConfigError(f"fallback_on: expected a list of error classes, got {names!r:.60}{hint}")
    given = list(names)
    unknown = [name for name in given if name not in set(ErrorClass)]
    if unknown:
        known = ", ".join(c.value for c in ErrorClass)
        near = (
            did_you_mean(unknown[0], [c.value for c in ErrorClass])
            if isinstance(unknown[0], str)
            else ""
        )
        raise ConfigError(f"fallback_on: unknown error classes {unknown}{near} (known: {known})")
    return frozenset(ErrorClass(name) for name in given)


_PER_PROVIDER = " (it is keyed by provider: {'anthropic': {...}})"


def validated_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against the request's own field types (values converted)."""
    fields = CanonicalRequest.model_fields
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in fields or key in _NOT_OPTIONS:
            allowed = sorted(set(fields) - _NOT_OPTIONS)
            meant = did_you_mean(key, allowed) or f"; options are: {', '.join(allowed)}"
            raise ConfigError(f"unknown request option {key!r}{meant}")
        annotation = fields[key].annotation
        try:
            bounded: Any = Annotated[annotation or Any, fields[key]]  # the field's bounds too
            checked: TypeAdapter[Any] = TypeAdapter(bounded)
            out[key] = checked.validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            at = " at " + "".join(f"[{part!r}]" for part in first["loc"]) if first["loc"] else ""
            hint = (
                _PER_PROVIDER if key in ("provider_options", "extra_headers", "extra_query") else ""
            )
            raise ConfigError(f"request option {key!r}{at}: {first['msg']}{hint}") from None
    return out


def check_routes(
    routes: dict[str, RouteSpec], known: Collection[str], source: str
) -> dict[str, RouteSpec]:
    """``routes`` when every model they name is ``known``; else a ConfigError naming it."""
    for name, route in routes.items():
        for target in route.targets():
            if target.model not in known:
                raise ConfigError(
                    f"{source}: route {name!r} names model {target.model!r}, which is not "
                    f"under models: (known: {', '.join(sorted(known)) or 'none'})"
                    f"{did_you_mean(target.model, known)}"
                )
    return dict(routes)
