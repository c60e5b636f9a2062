"""What a valid catalog entry is, and what becomes of one that is not (docs/catalog.md).

An entry of a snapshot is a dict with a ``provider`` and an ``id`` (strings), ``aliases`` (a
list of strings) and the fields of :class:`ModelInfo`, each of its type: a malformed one (a
limit that is not a number, a price that is not a decimal, a ``reasoning_form`` no model has,
an entry that is not a dict) is never built into a ModelInfo. The catalog skips it with one
WARN naming it, and its model is treated as uncatalogued; a refreshed snapshot is written
without it. Keys this version of metis does not know are ignored, so a newer snapshot loads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from metis.catalog.model_info import ModelInfo

log = logging.getLogger("metis")


@cache
def _entry() -> TypeAdapter[ModelInfo]:
    """The validator of an entry, built when the first entry is read (not at import)."""
    return TypeAdapter(ModelInfo)


class MalformedEntry(ValueError):
    """A catalog entry that cannot be a ModelInfo; the message names the field and why."""


def index_names(raw: Any) -> tuple[str, str, tuple[str, ...]]:
    """An entry's provider, id and aliases, what the catalog indexes it by; MalformedEntry if
    they are not strings (a list of them for the aliases)."""
    if not isinstance(raw, Mapping):
        raise MalformedEntry(f"not an object: {type(raw).__name__}")
    provider, model, aliases = raw.get("provider"), raw.get("id"), raw.get("aliases", ())
    for name, value in (("provider", provider), ("id", model)):
        if not isinstance(value, str) or not value:
            raise MalformedEntry(f"{name}: expected a non-empty string, got {_shown(value)}")
    if not isinstance(aliases, list | tuple) or not all(isinstance(a, str) for a in aliases):
        raise MalformedEntry(f"aliases: expected a list of strings, got {_shown(aliases)}")
    assert isinstance(provider, str) and isinstance(model, str)  # for the type checker
    return provider, model, tuple(aliases)


def model_info(raw: Mapping[str, Any]) -> ModelInfo:
    """The entry as a ModelInfo, every field checked; MalformedEntry naming what is wrong."""
    try:
        return _entry().validate_python(raw)
    except ValidationError as exc:
        raise MalformedEntry(problems(exc)) from None
    except (ValueError, TypeError, ArithmeticError) as exc:  # from a field's own conversion
        raise MalformedEntry(f"{type(exc).__name__}: {exc}") from None


def problems(error: ValidationError) -> str:
    """Each field's problem, ``field.path: why``, joined."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in error.errors()[:5]
    )


def label(raw: Any, position: int | None = None) -> str:
    """How a WARN names an entry: ``provider/id``, or its position when those are unusable."""
    if isinstance(raw, Mapping):
        provider, model = raw.get("provider"), raw.get("id")
        if isinstance(provider, str) and isinstance(model, str):
            return f"{provider}/{model}"
    return f"models[{position}]" if position is not None else "an entry"


def warn_skipped(source: str, name: str, why: str) -> None:
    """The one WARN record for a malformed entry of ``source``."""
    log.warning(
        "model catalog %s: entry %s is malformed (%s); skipped, its model is treated as "
        "uncatalogued",
        source,
        name,
        why,
        extra={"event": "metis.catalog_entry_skipped", "source": source, "entry": name},
    )


def valid_entries(
    entries: Iterable[Any], source: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The entries that are valid, in order, and for each one that is not, its name and why
    (each also one WARN): what a refreshed snapshot is written with."""
    kept: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for position, raw in enumerate(entries):
        try:
            index_names(raw)
            model_info(raw)
        except MalformedEntry as exc:
            skipped.append((label(raw, position), str(exc)))
            warn_skipped(source, *skipped[-1])
            continue
        kept.append(dict(raw))
    return kept, skipped


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
