"""capability_check: refuse, before any network call, what the model cannot serve (docs/catalog.md).

Every unmet need is listed in one CapabilityError, so a caller fixes them all at once.
"""

from __future__ import annotations

from metis.catalog.estimate import TokenProfile, estimate_request_tokens
from metis.errors import CapabilityError, InputTooLongError
from metis.model.capabilities import AdapterCapabilities
from metis.model.citation_fit import report_document_citations
from metis.model.content import Base64ImageSource, Role, ToolUseBlock
from metis.model.history import History, history_of
from metis.model.media_fit import Drop, fit_media
from metis.model.request import CanonicalRequest
from metis.model.tool_fit import fit_strict_tools, fit_tools
from metis.pipeline.call import Call
from metis.pipeline.services import StageServices
from metis.pipeline.settings import OllamaSettings
from metis.pipeline.stage import RequestStage
from metis.stages.policy.system_hoist import fold_system
from metis.stages.policy.tool_shim.history import text_history, uses_tools
from metis.wire.codec import CANNOT_SERVE
from metis.wire.compaction import window_start


class CapabilityCheck(RequestStage[CanonicalRequest]):
    name = "capability_check"

    _services = StageServices()

    def bind(self, services: StageServices) -> None:
        self._services = services  # what each model can serve, and how it counts tokens

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        caps = self._services.capabilities_for(call.wire_model)
        # A strict flag the model cannot take goes with a WARN, routed or not.
        request = fit_strict_tools(request, caps, call.warn_dropped)
        report_document_citations(request, caps, call.warn_dropped)
        history = call.history(request.messages)
        if call.terms.capabilities_checked:  # a router decided what it can serve before choosing
            request, _ = fit_media(request, caps, call.provider, call.warn_dropped, history)
            request = fit_tool_history(request, caps, call.warn_dropped)
            request = fold_system(request, caps, call.warn_dropped, history)
            return fit_tools(request, caps)[0]
        profile = self._services.token_profile_for(call.wire_model)
        drop = call.warn_dropped
        request, problems, _ = fitted_for(request, caps, call.provider, profile, drop, history)
        if problems:
            too_long = len(problems) == 1 and problems[0].startswith(_PAST_CONTEXT)
            raise (InputTooLongError if too_long else CapabilityError)(
                f"{call.model} {CANNOT_SERVE}"
                + "; ".join(problems)
                + how_to_declare(problems, isinstance(self._services.settings, OllamaSettings)),
                provider=call.provider,
                request_id=request.request_id,
            )
        return request


_DECLARABLE = {
    "takes no images": "supports_images",
    "does not think aloud": "supports_thinking",
    "has no tool calling": "supports_tools",
}


def how_to_declare(problems: list[str], ollama: bool = False) -> str:
    """Where the refused flags came from and how to declare them (each one refused named),
    or nothing when no problem is a flag a model may have been misjudged on; ``ollama``: the
    adapter's server can say what its model can, and how it is asked."""
    flags = [f for phrase, f in _DECLARABLE.items() if any(phrase in p for p in problems)]
    if not flags:
        return ""
    declared = ", ".join(f"'{flag}': True" for flag in flags)
    return (
        " (as metis knows the model: its catalog entry, else its stack's declared capabilities; "
        f"a model that can is declared so with capabilities={{{declared}}} in "
        "build_adapter or models.yaml, docs/catalog.md"
        + (
            "; an Ollama server says what its model can to an adapter opened for it: "
            "settings={'model': ...}, and async with or init_on_first_call=True)"
            if ollama
            else ")"
        )
    )


def fitted_for(
    request: CanonicalRequest,
    caps: AdapterCapabilities,
    provider: str,
    profile: TokenProfile | None,
    drop: Drop | None = None,
    history: History | None = None,
) -> tuple[CanonicalRequest, list[str], int]:
    """``request`` fitted to what ``caps`` can read (files it cannot read dropped from older
    turns, each with ``drop``; the system text in the first user turn where the model takes
    no system prompt; freeform tools as functions where there are no custom tools),
    what of it the model still cannot serve (a file in the turn sent, a grammar, ...), one
    phrase each, and its input-token estimate. The stage and a router decide alike; a router
    gives no ``drop``, since the adapter it chooses fits the request again and says so.
    ``history``: the record of the request's messages, when the caller has it."""
    messages = request.messages
    request, problems = fit_media(request, caps, provider, drop or _unsaid, history)
    request = fit_tool_history(request, caps, drop or _unsaid, history)
    request = fold_system(request, caps, drop or _unsaid, history)
    if request.messages is not messages:
        history = None  # a file was dropped, calls made text, system text folded: another
    request, unmet = fit_tools(request, caps)
    estimate = read_estimate(request, provider, profile, caps, history)
    problems += unmet + unmet_needs(request, caps, profile, estimate=estimate, history=history)
    return request, problems, int(estimate)


def fit_tool_history(
    request: CanonicalRequest,
    caps: AdapterCapabilities,
    drop: Drop,
    history: History | None = None,
) -> CanonicalRequest:
    """For a model without tool calling, the tool calls and results of the turns before the
    one being sent written as text (tool_shim's tags), each message's reported to ``drop``;
    those of the turn being sent (results answering the last assistant message's calls) stay,
    and are refused as the model cannot read them."""
    if caps.supports_tools or not (history or history_of(request.messages)).tools_at:
        return request
    messages = request.messages
    last = max((i for i, m in enumerate(messages) if m.role is Role.ASSISTANT), default=-1)
    if last >= 0 and any(isinstance(b, ToolUseBlock) for b in messages[last].content):
        last -= 1  # its calls are answered in the turn being sent
    older = messages[: last + 1]
    if not uses_tools(older):
        return request
    for i, message in enumerate(older):
        for kind in dict.fromkeys(b.type for b in message.content if b.type in _CALLING):
            drop(kind, NO_TOOL_CALLING, f"messages[{i}]")
    return request.model_copy(update={"messages": [*text_history(older), *messages[last + 1 :]]})


_CALLING = ("tool_use", "tool_result")
NO_TOOL_CALLING = "the model has no tool calling: sent as text in its turn"


def read_estimate(
    request: CanonicalRequest,
    provider: str,
    profile: TokenProfile | None,
    caps: AdapterCapabilities,
    history: History | None = None,
) -> int:
    """The input ``provider`` reads of ``request``, estimated: from the latest compaction block
    it made on, if any; a bound of it when the bound already tells whether it fits ``caps``'
    context (an :class:`AtLeast` when it does not)."""
    start = window_start(request.messages, [provider], history)
    read = request.model_copy(update={"messages": request.messages[start:]}) if start else request
    return _estimate(read, caps, profile, None if start else history)


def unmet_needs(
    request: CanonicalRequest,
    caps: AdapterCapabilities,
    profile: TokenProfile | None = None,
    *,
    estimate: int | None = None,
    history: History | None = None,
) -> list[str]:
    """What ``caps`` cannot serve of ``request``, one phrase each; ``estimate`` is the request's
    input-token estimate under ``profile`` when the caller already made it, ``history`` the
    record of its messages when the caller has it."""
    problems: list[str] = []
    history = history or history_of(request.messages)
    images = history.images
    if images and not caps.supports_images:
        problems.append("the request holds images and the model takes no images")
    elif images and caps.accepted_image_media_types:
        refused = sorted(
            {
                img.source.media_type
                for img in images
                if isinstance(img.source, Base64ImageSource)
                and img.source.media_type not in caps.accepted_image_media_types
            }
        )
        if refused:
            problems.append(f"image types {', '.join(refused)} are not accepted")
    uses_tools = bool(request.tools) or bool(history.tools_at)
    if uses_tools and not caps.supports_tools:
        problems.append("the request uses tools and the model has no tool calling")
    if request.parallel_tool_calls and not caps.supports_parallel_tool_calls:
        problems.append("parallel tool calls were asked for and the model makes one at a time")
    if forces_tool_use(request) and refuses_forcing(caps):
        problems.append("tool use was forced (tool_choice any or tool) and the model refuses that")
    if request.stop_sequences and not caps.supports_stop_sequences:
        problems.append("stop sequences were given and the model takes none")
    thinking = request.thinking
    budget = thinking is not None and thinking.budget_tokens is not None
    if budget and not (caps.supports_thinking or caps.reasoning is not None):
        problems.append("thinking was asked for and the model does not think aloud")
    if request.output_schema is not None and not caps.supports_structured_output:
        problems.append("an output schema was given and the model has no structured output")
    has_system = bool(request.system_prompt) or history.system
    if has_system and not caps.supports_system_prompt:
        problems.append("the request has a system prompt and the model takes none")
    if request.max_output_tokens > caps.max_output_tokens:
        problems.append(
            f"max_output_tokens {request.max_output_tokens} is above the model's "
            f"{caps.max_output_tokens}"
        )
    problems.extend(_server_tool_needs(request, caps))
    if estimate is None:
        estimate = _estimate(request, caps, profile, history)
    if estimate > caps.max_context_tokens:
        problems.append(_past_context(estimate, caps.max_context_tokens))
    return problems


def forces_tool_use(request: CanonicalRequest) -> bool:
    """Whether the request's tool choice forces a tool call (``any`` or a named tool)."""
    return request.tool_choice is not None and request.tool_choice.type in ("any", "tool")


def refuses_forcing(caps: AdapterCapabilities) -> bool:
    """Whether the model refuses a forced tool choice (the catalog's setting rules)."""
    return caps.setting_rules is not None and caps.setting_rules.refuses_forced_tool_choice


_PAST_CONTEXT = "the input is "


def _past_context(estimate: int, window: int) -> str:
    about = "at least" if isinstance(estimate, AtLeast) else "about"
    return f"{_PAST_CONTEXT}{about} {int(estimate)} tokens and the context holds {window}"


class AtLeast(int):
    """A lower bound of the token estimate, which is enough to say a request cannot fit."""


def _estimate(
    request: CanonicalRequest,
    caps: AdapterCapabilities,
    profile: TokenProfile | None,
    history: History | None = None,
) -> int:
    """The request's token estimate, made only when neither of its bounds (each a fraction of
    the work) decides: the upper one when it fits the context, the lower one when it is past it
    (a 50 MB tool result is refused at once, not read piece by piece)."""
    bound = estimate_request_tokens(request, profile, at_most=True, history=history)
    if bound <= caps.max_context_tokens or profile is None or profile.text_counting == "chars":
        return bound  # counting characters, the bound is the estimate
    least = estimate_request_tokens(request, profile, at_least=True, history=history)
    if least > caps.max_context_tokens:
        return AtLeast(least)
    return estimate_request_tokens(request, profile, history=history)


def _server_tool_needs(request: CanonicalRequest, caps: AdapterCapabilities) -> list[str]:
    """One phrase per kind of server tool the stack does not map (a provider's own tool is
    checked against the wire dialect when it is encoded)."""
    kinds = {t.kind for t in request.server_tools if t.kind != "provider"}
    return [
        f"the provider runs no {kind} tool that metis maps"
        for kind in sorted(kinds)
        if kind not in caps.server_tools
    ]


def _unsaid(block_type: str, reason: str, message_id: str | None) -> None:
    """A drop nobody is told of (a router's fitting: the chosen adapter's own pass warns)."""
