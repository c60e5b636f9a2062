"""The service tier a reply was served at, as the provider bills it (docs/contract.md §5)."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from metis.core.shown_fields import shown_fields
from metis.core.surrogates import clean
from metis.model.base import Canonical


class TierKind(StrEnum):
    """A provider's service tier, normalized. ``other`` for a word metis does not know (the
    provider's own is kept in ``ServiceTier.raw``)."""

    STANDARD = "standard"
    FLEX = "flex"
    PRIORITY = "priority"
    BATCH = "batch"
    RESERVED = "reserved"
    """Capacity bought ahead (OpenAI's ``scale``, Bedrock's ``reserved``, Vertex's
    provisioned throughput): not billed per token at a rate a catalog gives."""
    OTHER = "other"


class ServiceTier(Canonical):
    """The tier that served a call (``TokenUsage.service_tier``): ``kind`` normalized,
    ``raw`` the provider's own word (OpenAI's ``default``, Vertex's ``ON_DEMAND_FLEX``)."""

    kind: TierKind
    raw: str

    def __str__(self) -> str:
        """The kind's word, and the provider's in parentheses where it differs:
        ``standard (default)``."""
        if self.raw == self.kind.value:
            return self.raw
        return f"{self.kind.value} ({self.raw})"

    def __repr_args__(self) -> Iterator[tuple[str, Any]]:
        return shown_fields(self)


_KINDS = {
    "standard": TierKind.STANDARD,
    "default": TierKind.STANDARD,
    "on_demand": TierKind.STANDARD,
    "flex": TierKind.FLEX,
    "on_demand_flex": TierKind.FLEX,
    "priority": TierKind.PRIORITY,
    "on_demand_priority": TierKind.PRIORITY,
    "fast": TierKind.PRIORITY,  # OpenAI's name for priority processing on some models
    "batch": TierKind.BATCH,
    "scale": TierKind.RESERVED,
    "reserved": TierKind.RESERVED,
    "provisioned_throughput": TierKind.RESERVED,
}
_UNRESOLVED = frozenset({"", "auto", "unspecified", "traffic_type_unspecified"})
_KEPT: dict[str, ServiceTier | None] = {}


def service_tier(word: object) -> ServiceTier | None:
    """The tier a provider's word names; None for no word, or one that names no tier served
    (a request's ``auto`` echoed back, Vertex's ``TRAFFIC_TYPE_UNSPECIFIED``). A word that is
    not UTF-8 text (a lone surrogate of a JSON escape) is kept with U+FFFD in its place."""
    if not isinstance(word, str):
        return None
    kept = _KEPT.get(word, _KEPT)
    if kept is not _KEPT:
        return kept  # type: ignore[return-value]
    name = word.strip().lower()
    tier = None
    if name not in _UNRESOLVED and len(word) <= 64:
        tier = ServiceTier(kind=_KINDS.get(name, TierKind.OTHER), raw=clean(word))
    if len(_KEPT) < 256:  # the few words providers send, each built once
        _KEPT[word] = tier
    return tier
