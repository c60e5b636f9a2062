"""What a run of the agent loop reports besides the model's own events, and how it ended.

A run's events are the canonical stream events of each model call (docs/contract.md §2) with
these in between: ``step.start`` before each call, ``tool.result`` for each tool call answered,
``step.complete`` after each step, and ``run.complete`` last, carrying the :class:`RunResult`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar, Generic, Literal

from typing_extensions import TypeVar

from metis.core.money import USD
from metis.cost import Cost
from metis.model.content import Message, ToolResultBlock, ToolUseBlock
from metis.model.response import CanonicalResponse, DroppedContent, TokenUsage

OutputT = TypeVar("OutputT", default=Any)
"""What ``RunResult.output`` holds: the ``output_type`` the run was given (``None`` without
one; a bare ``RunResult`` leaves it open)."""
AskedT = TypeVar("AskedT", default=None)
"""A run's ``output_type`` (``None`` when it is not given): ``Session.run`` returns a
``RunResult[AskedT]``."""

RunEnd = Literal["complete", "step_limit", "cancelled", "tool_calls_pending"]
"""Why a run ended: the model stopped calling tools; it still called them after ``max_steps``
model calls (their results are in the history, so ``run()`` goes on from there); it was
cancelled; or it called a tool the session has only a definition of, which the application
answers (``session.add(Message.tool(...))``, then ``run()``)."""


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """A finished run: the last reply, why the run ended, and what it took; with
    ``output_type=City``, a ``RunResult[City]``."""

    response: CanonicalResponse
    """The last reply (for a cancelled step, what arrived of it)."""
    reason: RunEnd
    steps: int
    """How many model calls the run made."""
    usage: TokenUsage
    """Summed over the run's model calls, and the compact endpoint's where the session had
    the provider compact the history (``estimated`` if any count was)."""
    costs: tuple[Cost, ...]
    """Each model call's cost (a compact endpoint's call before its step's), priced by the
    model catalog (docs/contract.md §5)."""
    messages: tuple[Message, ...]
    """What the run added to the session's history, in order."""
    output: OutputT | None = None
    """With ``output_type``: the last reply, validated as that type (``None`` when the run
    ended otherwise than ``complete``)."""
    pending: tuple[ToolUseBlock, ...] = ()
    """With ``tool_calls_pending``: the calls the application answers."""
    warnings: tuple[DroppedContent, ...] = ()
    """Every model call's warnings, in order: what each step's provider could not take
    (the last reply's alone are ``response.warnings``)."""

    @property
    def text(self) -> str:
        """The last reply's text."""
        return self.response.text

    @property
    def cost_usd(self) -> USD:
        """The run's total cost in USD; a call of a model with no price counts as 0 here
        (where ``Session.cost_usd`` is None): :attr:`cost_known` says whether one did."""
        return USD(sum((cost.usd for cost in self.costs), Decimal(0)))

    @property
    def cost_known(self) -> bool:
        """Every call of the run had a price, so :attr:`cost_usd` is its whole cost; False:
        it is a lower bound (``costs`` say which call had none, and why)."""
        return all(cost.priced for cost in self.costs)


@dataclass(frozen=True, slots=True)
class CompactionCall:
    """A call to the provider's compact endpoint the session made before a model call, its
    history over the window (docs/sessions.md, "Compaction by the provider"): what it spent."""

    model: str
    usage: TokenUsage
    cost: Cost


class RunEvent:
    """The base of the agent loop's own events."""

    __slots__ = ()
    type: ClassVar[str]


@dataclass(frozen=True, slots=True)
class StepStart(RunEvent):
    """A model call is about to be made: the step's number (from 1) and the model."""

    type: ClassVar[str] = "step.start"
    step: int
    model: str


@dataclass(frozen=True, slots=True)
class ToolResultEvent(RunEvent):
    """A tool call answered: by the tool, or with an ``is_error`` result (it failed, timed
    out, or was cancelled)."""

    type: ClassVar[str] = "tool.result"
    step: int
    call: ToolUseBlock
    result: ToolResultBlock


@dataclass(frozen=True, slots=True)
class StepComplete(RunEvent):
    """A step is over: its reply and, when it called tools, the results sent back; when the
    history was compacted by the provider's endpoint first, that call."""

    type: ClassVar[str] = "step.complete"
    step: int
    response: CanonicalResponse
    tool_results: Message | None = None
    compaction: CompactionCall | None = None


@dataclass(frozen=True, slots=True)
class RunComplete(RunEvent):
    """The run is over; always its last event."""

    type: ClassVar[str] = "run.complete"
    result: RunResult = field()
