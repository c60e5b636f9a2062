"""The canonical knobs of a request besides its content: reasoning effort, sampling ranges, and
what a model is known to take of them (docs/contract.md §13, docs/reasoning.md).

A request asks for reasoning as a token budget or as an effort level; the catalog says how each
model is asked (:class:`ReasoningProfile`) and the stack which sampling settings its API takes,
in which range (:data:`SamplingRanges`). Both travel with a model's capabilities, so the codec
stage sends only what the routed model takes and lists the rest in the result's warnings.
"""

from __future__ import annotations

from typing import Literal

from metis.model.base import Canonical

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
"""How hard a model reasons before answering, lowest first; ``none`` switches reasoning off."""

EFFORT_ORDER: tuple[ReasoningEffort, ...] = (
    "none",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)

SamplingName = Literal[
    "temperature", "top_p", "top_k", "seed", "frequency_penalty", "presence_penalty"
]
"""The canonical sampling settings (stop sequences are a capability of their own)."""

SAMPLING_NAMES: tuple[SamplingName, ...] = (
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "frequency_penalty",
    "presence_penalty",
)

CacheTTL = Literal["5m", "1h"]
"""How long a cache entry lives where the provider lets you choose (Anthropic, Bedrock)."""

SamplingRanges = dict[str, tuple[float | None, float | None]]
"""What a stack's API takes of the sampling settings: each name it takes, with its valid range
(either bound None: no bound documented). A name left out is not taken."""


class ReasoningProfile(Canonical):
    """How one model is asked to reason (from the catalog, docs/reasoning.md)."""

    form: Literal["budget", "effort", "adaptive", "always"]
    """``budget``: a token budget; ``effort``: a level; ``adaptive``: a level, the model deciding
    how much (Anthropic from Claude 4.6), and a budget where ``budget_max`` allows one;
    ``always``: it reasons and takes no setting."""
    levels: tuple[ReasoningEffort, ...] = ()
    """The effort levels it takes, lowest first (``none`` among them when it can stop)."""
    can_disable: bool = True
    """Whether reasoning can be switched off (``none``); False: it always reasons."""
    budget_min: int | None = None
    budget_max: int | None = None
    """The budgets it takes (budget and adaptive forms); None above: no budget at all."""
    family: str | None = None
    """Whose request fields a platform passes through to it (Bedrock's
    ``additionalModelRequestFields``): ``anthropic``, ``openai``, ``nova``, ``deepseek``."""
    sampling_only_without_reasoning: tuple[str, ...] = ()
    """Sampling settings it takes only with reasoning off (GPT-5.1 and later: temperature and
    top_p with effort ``none``); refused (or, on DeepSeek, ignored) whenever it reasons."""
    reasons_by_default: bool = False
    """It reasons when the request does not say (DeepSeek V4); False: it does not, or
    nothing is said of it without a setting."""


class SettingRules(Canonical):
    """What a model refuses of a request's settings beyond their ranges (from the catalog,
    metis/catalog/knobs.py): the settings it takes only one at a time, stop sequences, a forced
    tool choice."""

    one_at_a_time: tuple[tuple[SamplingName, ...], ...] = ()
    """Groups of sampling settings the model refuses together (Claude 4.5 and 4.6: temperature
    or top_p); of a group the request sets, the first is sent and the rest left out."""
    refuses_stop: bool = False
    """Stop sequences are refused (OpenAI o3 and o4-mini, xAI grok-4)."""
    refuses_forced_tool_choice: bool = False
    """A tool choice that forces tool use (``any`` or a named tool) is refused (Claude Opus
    from 5.5, Fable and Mythos from 5.1): a CapabilityError before sending."""
