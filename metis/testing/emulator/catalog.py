"""Which models the emulator serves: those metis's model catalog knows for the providers a
format stands for (``models="catalog"``, the default, so an unknown model gets the real API's
404), those and the names of a list (a local server's models, say), or any name at all
(``models="any"``).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable
from dataclasses import dataclass

from metis.catalog.catalog import default_catalog


@dataclass(frozen=True, slots=True)
class Listed:
    """One model as a model list shows it."""

    id: str
    name: str
    released: str  # ISO date
    context: int
    output: int

    @property
    def created(self) -> int:
        """The release date as Unix seconds."""
        day = datetime.date.fromisoformat(self.released)
        return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp())


class Served:
    """``known(catalogs, model)``: whether a model is served; ``listing(catalogs)``: the
    models a format lists, in id order."""

    def __init__(self, models: str | Iterable[str] = "catalog") -> None:
        if isinstance(models, str) and models not in ("catalog", "any"):
            raise ValueError(
                f"models={models!r}: expected 'catalog', 'any' or a list of model names"
            )
        self.policy = models if isinstance(models, str) else "catalog"
        self.names = frozenset(() if isinstance(models, str) else models)
        if self.policy == "catalog":  # read once per process, before the first request waits
            _every_name()

    def known(self, catalogs: Iterable[str], model: str) -> bool:
        """``catalogs`` holding ``"*"``: any provider's model (OpenAI-compatible services)."""
        if self.policy == "any" or model in self.names:
            return True
        if "*" in catalogs:
            return model in _every_name()
        return any(default_catalog().get(p, model) is not None for p in catalogs)

    def listing(self, catalogs: Iterable[str]) -> list[Listed]:
        found = {name: Listed(name, name, "2025-01-01", 128_000, 8_192) for name in self.names}
        for info in (
            i
            for provider in catalogs
            if provider != "*"
            for i in default_catalog().models(provider)
        ):
            context, output = info.context_window or 128_000, info.max_output_tokens or 8_192
            found.setdefault(
                info.id, Listed(info.id, info.name or info.id, _iso(info.released), context, output)
            )
        return sorted(found.values(), key=lambda listed: listed.id)


@functools.cache
def _every_name() -> frozenset[str]:
    return frozenset(name for info in default_catalog() for name in (info.id, *info.aliases))


def _iso(released: str | None) -> str:
    try:
        return datetime.date.fromisoformat(str(released)[:10]).isoformat()
    except ValueError:
        return "2025-01-01"
