"""The canonical batch: many requests sent as one provider batch, read back by the caller's
ids (docs/batches.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from metis.core.surrogates import clean
from metis.errors import AdapterError

if TYPE_CHECKING:
    from metis.model.response import CanonicalResponse, DroppedContent

BatchState = Literal["pending", "running", "completed", "failed", "expired", "cancelled"]
"""Every provider's lifecycle, reduced: ``completed``, ``failed``, ``expired`` and
``cancelled`` are final (results may still be read from a finished batch)."""
FINAL_STATES: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})

ItemOutcome = Literal["succeeded", "errored", "cancelled", "expired"]


class MissingResult(AdapterError, KeyError):
    """``results[custom_id]`` for an id the results do not name: one the batch did not have,
    or one the provider left out (its status counting more requests than the results name,
    which the message says). A ``KeyError`` too."""

    def __str__(self) -> str:
        return AdapterError.__str__(self)


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """Where a batch is: ``state`` (canonical), ``raw`` (the provider's own word), and the
    counts the provider reports (``None`` where it reports none). ``warnings``, on what
    ``submit`` returns only: what each item's request left out when it was encoded (a setting
    the model does not take, content it cannot read), by the caller's id, as a single call's
    reply lists them; the results, read later, do not carry them."""

    id: str
    provider: str
    state: BatchState
    raw: str
    total: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    errors: tuple[str, ...] = ()
    """Why the batch failed as the provider says it (OpenAI's validation errors, a line each;
    a Gemini batch operation's error); empty when it says nothing."""
    warnings: dict[str, list[DroppedContent]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:  # the provider's words, a lone surrogate in them U+FFFD
        object.__setattr__(self, "id", clean(self.id))
        object.__setattr__(self, "errors", tuple(clean(error) for error in self.errors))

    @property
    def done(self) -> bool:
        """The batch has ended (finished, failed, cancelled or expired): nothing more comes."""
        return self.state in FINAL_STATES


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One request's result: its ``response`` when it succeeded, else its ``error`` (an
    ``AdapterError`` classified from the provider's per-item error) and why."""

    custom_id: str
    outcome: ItemOutcome
    response: CanonicalResponse | None = None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class BatchResults:
    """Every item of a finished batch, by the caller's id (results come in any order)."""

    status: BatchStatus
    items: dict[str, BatchItem] = field(default_factory=dict)

    def __getitem__(self, custom_id: str) -> BatchItem:
        found = self.items.get(custom_id)
        if found is not None:
            return found
        named, counted = len(self.items), self.status.total or 0
        said = f"{named} requests"
        if counted > named:
            said = f"{named} of the {counted} requests its status counts: the provider left "
            said += f"{counted - named} out"
        raise MissingResult(
            f"batch {self.status.id}: no result for {custom_id!r}; its results name {said}",
            provider=self.status.provider,
        )

    def __len__(self) -> int:
        return len(self.items)

    @property
    def succeeded(self) -> dict[str, CanonicalResponse]:
        """The replies of the requests that succeeded, by your ids."""
        return {k: v.response for k, v in self.items.items() if v.response is not None}

    @property
    def failed(self) -> dict[str, BatchItem]:
        """The items of the requests that did not succeed, by your ids (each with its
        ``error``)."""
        return {k: v for k, v in self.items.items() if v.response is None}
