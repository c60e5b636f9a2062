"""Before a model call: does the history fit the model's context window, and if not, compact it.

The window is the routed model's, from the model catalog (``capabilities_for``: for a router,
its first model's). The request fits when its input tokens and the reply's
``max_output_tokens`` together fit the window. The input is counted as ``context_check`` says:

- ``auto`` (the default): the offline estimate while it is under half the room left for the
  input; past that, the provider's own count (``count_tokens``: Anthropic, OpenAI Responses,
  Gemini, Bedrock; the estimate elsewhere), one counting call per model call;
- ``count``: the provider's count before every call;
- ``estimate``: the offline estimate only;
- ``off``: no check (the provider's own error, ``ContextOverflowError``, says it did not fit).

A request that does not fit raises :class:`~metis.errors.ContextOverflowError` before anything
is sent, unless the session compacts (``compact``):

- a function of the history and the :class:`ContextBudget` that returns a shorter history
  (summarized, trimmed: the application's choice);
- ``"provider"``: the provider's own compaction. Every call asks the provider to compact past
  :data:`PROVIDER_COMPACT_AT` of the room for the input (Anthropic's context management, the
  Responses API's ``context_management``), so the reply holds a compaction block before the
  history outgrows the window; a history that no longer fits is compacted by the provider's
  compact endpoint where it has one (Responses), its turn's own messages kept after it.

The compacted history replaces the session's, and is checked again. The provider reads a
conversation from the latest compaction block it made, so what precedes it is not counted.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from metis.adapter.adapter import Adapter
from metis.adapter.compaction import can_compact, compact_conversation
from metis.calls.priced import priced_usage
from metis.errors import ConfigError, ContextOverflowError
from metis.model.content import Message, Role, ToolResultBlock
from metis.model.request import CanonicalRequest, Compaction
from metis.sessions.events import CompactionCall
from metis.sessions.models import Resolved
from metis.wire.compaction import window_start

ContextCheck = Literal["auto", "count", "estimate", "off"]
CONTEXT_CHECKS: tuple[ContextCheck, ...] = ("auto", "count", "estimate", "off")
AUTO_COUNT_FRACTION = 0.5
"""``auto`` asks the provider's count once the estimate passes this share of the input room."""


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """What a model call has room for: the window, the reply's share of it, and the input's
    size as counted (``source``: ``provider`` or ``estimate``)."""

    model: str
    window: int
    max_output_tokens: int
    input_tokens: int
    source: Literal["provider", "estimate"]

    @property
    def limit(self) -> int:
        """The most input tokens that fit beside the reply."""
        return self.window - self.max_output_tokens

    @property
    def fits(self) -> bool:
        return self.input_tokens <= self.limit


@dataclass(frozen=True, slots=True)
class Fitted:
    """A request as it fits the model's window: the budget it was measured at (None when the
    check is off), whether its history was compacted, and the call to the provider's compact
    endpoint that did it, if one did."""

    request: CanonicalRequest
    budget: ContextBudget | None
    compacted: bool = False
    compaction: CompactionCall | None = None


Compactor = Callable[
    [list[Message], ContextBudget], Awaitable[Sequence[Message]] | Sequence[Message]
]
"""A function (plain or async) from the history and the budget to a shorter history."""
Compact = Compactor | Literal["provider"] | None
"""A session's overflow policy: none (a ContextOverflowError), the provider's, or a function."""
PROVIDER_COMPACT_AT = 0.8
"""``"provider"``: the share of the input's room past which the provider is asked to compact."""


def checked_compact(compact: object) -> Compact:
    """``compact`` if it is a policy a session takes."""
    if compact is None or compact == "provider" or callable(compact):
        return compact
    raise ConfigError(f"compact is a function or 'provider', got {compact!r:.100}")


def with_provider_compaction(
    resolved: Resolved, request: CanonicalRequest, compact: Compact
) -> CanonicalRequest:
    """``request`` asking the provider to compact, when the session leaves compaction to it."""
    if compact != "provider":
        return request
    caps = resolved.chat.capabilities_for(resolved.wire_model)
    room = caps.max_context_tokens - request.max_output_tokens
    trigger = Compaction(trigger_tokens=max(1, int(room * PROVIDER_COMPACT_AT)))
    return request.model_copy(update={"compaction": trigger})


async def measure(
    resolved: Resolved, request: CanonicalRequest, check: ContextCheck
) -> ContextBudget:
    """The budget of ``request`` on ``resolved``'s model, counted as ``check`` says."""
    caps = resolved.chat.capabilities_for(resolved.wire_model)
    room = caps.max_context_tokens - request.max_output_tokens
    model = request.model if isinstance(resolved.chat, Adapter) else None
    start = window_start(request.messages, [adapter.name for adapter, _ in resolved.servers])
    if start:
        request = request.model_copy(update={"messages": request.messages[start:]})
    estimate = resolved.chat.estimate_input_tokens(
        request.messages, request.tools, request.system_prompt, model=model
    )
    tokens = estimate
    source_kind: Literal["provider", "estimate"] = "estimate"
    if check == "count" or (check == "auto" and estimate > room * AUTO_COUNT_FRACTION):
        counted = await resolved.chat.count_tokens(request)
        tokens, source_kind = counted.input_tokens, counted.source
    return ContextBudget(
        resolved.label, caps.max_context_tokens, request.max_output_tokens, tokens, source_kind
    )


async def fitted(
    resolved: Resolved,
    request: CanonicalRequest,
    check: ContextCheck,
    compact: Compact,
) -> Fitted:
    """``request`` as it fits the model's window (its messages compacted if they had to be);
    a ContextOverflowError when it cannot fit."""
    if check == "off":
        return Fitted(request, None)
    budget = await measure(resolved, request, check)
    if budget.fits:
        return Fitted(request, budget)
    if compact is None:
        raise _overflow(budget, resolved, "give the session a compactor (Session(compact=...))")
    call = None
    if compact == "provider":
        messages, call = await _provider_compacted(resolved, request, budget)
    else:
        messages = await _compacted(compact, list(request.messages), budget)
    request = request.model_copy(update={"messages": messages})
    budget = await measure(resolved, request, check)
    if not budget.fits:
        raise _overflow(budget, resolved, "the compactor's history does not fit either")
    return Fitted(request, budget, True, call)


async def _compacted(
    compact: Compactor, messages: list[Message], budget: ContextBudget
) -> list[Message]:
    result: object = compact(messages, budget)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, list | tuple) or not all(isinstance(m, Message) for m in result):
        raise ConfigError(f"a compactor returns a list of Messages, got {result!r:.200}")
    if not result:
        raise ConfigError("a compactor returned no messages; a call needs at least one")
    return list(result)


async def _provider_compacted(
    resolved: Resolved, request: CanonicalRequest, budget: ContextBudget
) -> tuple[list[Message], CompactionCall]:
    """The history compacted by the provider's endpoint, up to the turn's own messages (the
    last user message that answers no tool call, and what followed it), which stay after;
    and that call, priced as the model's."""
    adapter, model = resolved.servers[0] if resolved.servers else (None, "")
    if adapter is None or not can_compact(adapter):
        raise _overflow(budget, resolved, "its provider compacts only past the trigger it is sent")
    messages = list(request.messages)
    start = turn_start(messages)
    if start == 0:
        raise _overflow(budget, resolved, "the turn's own messages are all there is to compact")
    earlier = request.model_copy(update={"messages": messages[:start], "model": model})
    compacted = await compact_conversation(adapter, earlier)
    call = CompactionCall(model, compacted.usage, priced_usage(model, compacted.usage))
    return [*compacted.messages, *messages[start:]], call


def turn_start(messages: list[Message]) -> int:
    """Where the turn being sent begins: its user message that answers no tool call."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role is Role.USER and not any(
            isinstance(b, ToolResultBlock) for b in message.content
        ):
            return i
    return 0


def _overflow(budget: ContextBudget, resolved: Resolved, advice: str) -> ContextOverflowError:
    first = resolved.servers[0][0].name if resolved.servers else None
    return ContextOverflowError(
        f"{budget.model}: the input is {budget.input_tokens} tokens ({budget.source}) and the "
        f"reply may take {budget.max_output_tokens}, over the context window of "
        f"{budget.window}; nothing was sent: {advice}",
        provider=first,
    )
