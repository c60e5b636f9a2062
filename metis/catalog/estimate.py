"""Pre-flight token estimates, with no tokenizer and no network (docs/contract.md §1).

The estimate is the text the provider shows the model, counted, plus what the provider adds
around it: a few tokens per message, a hidden tool-use prompt when tools are present, tool
definitions rendered the provider's way, a flat cost per image. How much of each is a
:class:`TokenProfile`, declared per provider stack (``token_estimate:`` in its YAML); without
one, the provider-neutral default applies (four characters a token). Good enough to route on
and to refuse a request that cannot fit; never used for billing.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from metis.catalog.estimate_tools import rendered as _rendered
from metis.catalog.token_profile import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from metis.catalog.token_profile import DEFAULT_PROFILE as DEFAULT_PROFILE
from metis.catalog.token_profile import PER_IMAGE as PER_IMAGE
from metis.catalog.token_profile import PER_MESSAGE as PER_MESSAGE
from metis.catalog.token_profile import PER_TOOL as PER_TOOL
from metis.catalog.token_profile import TokenProfile as TokenProfile
from metis.model.content import (
    DocumentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.history import History, history_of
from metis.model.media import MediaBlock, TextSource
from metis.model.memo import MessageMemo
from metis.model.request import CanonicalRequest, ToolChoice, ToolDefinition
from metis.model.schema_forms import form


def estimate_input_tokens(
    messages: list[Message],
    tools: list[ToolDefinition],
    system_prompt: str | None,
    profile: TokenProfile | None = None,
    *,
    tool_choice: ToolChoice | None = None,
    thinking: bool = False,
    output_schema: dict[str, Any] | None = None,
    history: History | None = None,
) -> int:
    """About how many input tokens the provider will count for this prompt: the text it
    shows the model, counted under ``profile``, plus the provider's framing. No network,
    linear in the input. Without a profile, the provider-neutral default. ``history``: the
    record of ``messages`` (:mod:`metis.model.history`), when the caller has it."""
    p = profile or DEFAULT_PROFILE
    units = 0  # characters or pieces of text, turned into tokens once, at the end
    overhead = 0
    if system_prompt:
        units += _units(system_prompt, p)
        overhead += p.system_overhead
    if messages:
        record = history or history_of(messages)
        kept = record.kept(("units", id(p)), lambda: _history_units(messages, p))
        units += kept[1]
        overhead += kept[2]
        overhead += p.per_request
    if tools:
        overhead += _tools_overhead(tools, tool_choice, p)
    if output_schema is not None:
        units += _units(_compact(output_schema), p)
    if thinking:
        overhead += p.thinking_overhead_with_tools if tools else p.thinking_overhead
    if p.text_counting == "chars":
        return int(units / p.chars_per_token) + overhead
    return round(units * p.tokens_per_piece) + overhead


def _history_units(messages: list[Message], p: TokenProfile) -> tuple[TokenProfile, int, int]:
    """(``p``, units, framing) of a whole history (``p`` held: a dead profile's address taken
    by another never finds its counts)."""
    units = overhead = 0
    current_turn = 0  # reasoning counts in messages[current_turn:]
    if p.thinking_blocks == "current_turn":
        current_turn = _current_turn_start(messages)
    elif p.thinking_blocks == "none":
        current_turn = len(messages)
    for index, message in enumerate(messages):
        counted, framing = _kept_units(message, p, index >= current_turn)
        units += counted
        overhead += p.per_message + framing
    return p, units, overhead


_UNITS: MessageMemo[tuple[TokenProfile, int, int]] = MessageMemo()
"""A message's units and framing under a profile (found by its identity, and held: a dead
profile's address taken by another never finds its counts)."""


def _kept_units(message: Message, p: TokenProfile, reasoning: bool) -> tuple[int, int]:
    key = (id(p), reasoning)
    kept = _UNITS.get(message, key)
    if kept is None or kept[0] is not p:
        kept = _UNITS.put(message, key, (p, *_message_units(message, p, reasoning=reasoning)))
    return kept[1], kept[2]


def _message_units(message: Message, p: TokenProfile, *, reasoning: bool) -> tuple[int, int]:
    """(units of text, tokens of framing) of one message's blocks; its reasoning counts only
    when ``reasoning`` (the profile says which turns the provider keeps it for)."""
    units = overhead = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            units += _units(block.text, p)
        elif isinstance(block, ThinkingBlock):
            if reasoning:
                units += _units(block.thinking, p)
        elif isinstance(block, RedactedThinkingBlock):
            if reasoning:
                overhead += _redacted(block.data)
        elif isinstance(block, ToolUseBlock):
            units += _units(block.name, p) + _units(_render_input(block.input, p), p)
            overhead += p.per_tool_call
        elif isinstance(block, ToolResultBlock):
            if isinstance(block.content, str):
                units += _units(block.content, p)
            else:
                for part in block.content:
                    if isinstance(part, TextBlock):
                        units += _units(part.text, p)
                    else:
                        overhead += p.image_tokens
        elif isinstance(block, ImageBlock):
            overhead += p.image_tokens
        elif isinstance(block, DocumentBlock) and isinstance(block.source, TextSource):
            units += _units(block.source.text, p)  # other files: the provider's count only
    return units, overhead


def uncounted_files(request: CanonicalRequest) -> int:
    """How many of ``request``'s files the estimate leaves out (a document that is not text,
    audio, video: only the provider can count them)."""
    return sum(
        1
        for message in request.messages
        for block in message.content
        if isinstance(block, MediaBlock)
        and not (isinstance(block, DocumentBlock) and isinstance(block.source, TextSource))
    )


def _tools_overhead(
    tools: list[ToolDefinition], tool_choice: ToolChoice | None, p: TokenProfile
) -> int:
    """The tokens the tool definitions cost, with the provider's hidden tool prompt."""
    forced = tool_choice is not None and tool_choice.type in ("any", "tool")
    hidden = p.tools_overhead
    if forced and p.tools_overhead_forced is not None:
        hidden = p.tools_overhead_forced
    overhead = hidden + sum(p.per_tool + _tool_tokens(t, p) for t in tools)
    if p.tool_rendering == "typescript":
        overhead += count_text(_TS_OPEN + _TS_CLOSE, p)
    return overhead


def estimate_request_tokens(
    request: CanonicalRequest,
    profile: TokenProfile | None = None,
    *,
    at_most: bool = False,
    at_least: bool = False,
    history: History | None = None,
) -> int:
    """:func:`estimate_input_tokens` for a whole canonical request. ``at_most``: a bound the
    estimate never exceeds, for a fraction of the work (a text of n characters is at most n
    pieces), enough to tell a request far below a context limit. ``at_least``: a bound the
    estimate is never below, as cheap (a piece of n characters costs at least n / word_chars,
    and only ASCII spaces and control characters fall outside every piece), enough to refuse
    a request far past the limit without reading it piece by piece. ``history``: the record of
    its messages, when the caller has it."""
    slack = 0
    if (at_most or at_least) and profile is not None and profile.text_counting == "pieces":
        # round() of each count may differ from the bound's int() by one (float error by one)
        slack = 2 * (len(request.tools) + 2)
        profile, slack = (_length_profile(profile), slack) if at_most else (_least(profile), -slack)
    return slack + estimate_input_tokens(
        request.messages,
        request.tools,
        request.system_prompt,
        profile,
        tool_choice=request.tool_choice,
        thinking=request.thinking is not None,
        output_schema=request.output_schema,
        history=history,
    )


_LENGTH_PROFILES: dict[int, tuple[TokenProfile, TokenProfile]] = {}
_LEAST_PROFILES: dict[int, tuple[TokenProfile, TokenProfile]] = {}


class _AtLeast(TokenProfile):
    """A pieces profile's lower bound: it counts the characters a piece can hold, at
    ``word_chars`` a piece (see :func:`_covered`)."""


def _least(profile: TokenProfile) -> TokenProfile:
    """``profile``'s lower bound (an :class:`_AtLeast`), made once."""
    kept = _LEAST_PROFILES.get(id(profile))
    if kept is not None and kept[0] is profile:
        return kept[1]
    if len(_LEAST_PROFILES) > 64:
        _LEAST_PROFILES.clear()
    fields = profile.model_dump(exclude={"models"})
    fields.update(text_counting="chars", chars_per_token=profile.word_chars)
    fields["chars_per_token"] /= profile.tokens_per_piece
    bound = _AtLeast.model_validate(fields)
    _LEAST_PROFILES[id(profile)] = (profile, bound)
    return bound


def _length_profile(profile: TokenProfile) -> TokenProfile:
    """``profile`` counting a character where it counts a piece (its bound), made once."""
    kept = _LENGTH_PROFILES.get(id(profile))
    if kept is not None and kept[0] is profile:
        return kept[1]
    if len(_LENGTH_PROFILES) > 64:
        _LENGTH_PROFILES.clear()
    bound = profile.model_copy(
        update={"text_counting": "chars", "chars_per_token": 1 / profile.tokens_per_piece}
    )
    _LENGTH_PROFILES[id(profile)] = (profile, bound)
    return bound


# Text -----------------------------------------------------------------------------------------

_PUNCT = r"!-/:-@\[-`{-~"  # ASCII punctuation


@functools.cache
def _piece_pattern() -> re.Pattern[str]:
    return re.compile(
        rf"[{_PUNCT}]?(?:[A-Z]*[a-z]+|[A-Z]+[a-z]*)(?:'[a-z]{{1,2}})?"  # 'get' '_user' 'HTTP'
        r"|[0-9]{1,3}"  # a number, up to three digits a piece
        r"|[^\x00-\x7f]"  # any other script: a piece a character
        rf"|[{_PUNCT}]+[\r\n]*"  # a run of punctuation: '{"', '":', '**', '=>'
        r"|\s*[\r\n]+"  # line breaks
        r"|\s+(?=\s)"  # indentation
    )


def count_text(text: str, profile: TokenProfile = DEFAULT_PROFILE) -> int:
    """The tokens of one text under ``profile``, without any framing."""
    if profile.text_counting == "chars":
        return int(_units(text, profile) / profile.chars_per_token)
    return round(_pieces(text, profile.word_chars) * profile.tokens_per_piece)


def _units(text: str, profile: TokenProfile) -> int:
    if profile.text_counting == "chars":
        return _covered(text) if isinstance(profile, _AtLeast) else len(text)
    return _pieces(text, profile.word_chars)


_OUTSIDE_PIECES = bytes(range(0x21)) + b"\x7f"


def _covered(text: str) -> int:
    """The characters of ``text`` that some piece holds (see :func:`_pieces`): all but ASCII
    whitespace and control characters (a single space before a word is in no piece). Two
    passes in C: UTF-8 encodes no other character with those bytes."""
    encoded = text.encode("utf-8", "surrogatepass")
    return len(text) - (len(encoded) - len(encoded.translate(None, _OUTSIDE_PIECES)))


def _pieces(text: str, word_chars: int) -> int:
    """How a BPE tokenizer pre-splits ``text`` (OpenAI's o200k pattern, for ASCII): a word
    with the space or the one punctuation mark before it, a capitalised or upper-case run, up
    to three digits, a run of punctuation, line breaks, indentation. Each piece is a token,
    except that one longer than ``word_chars`` characters (a rare word, a long separator line)
    costs ceil(length / word_chars); any other script costs a token a character. Linear, no
    vocabulary."""
    total = 0
    for match in _piece_pattern().finditer(text):
        length = match.end() - match.start()
        total += -(-length // word_chars) if length > word_chars else 1
    return total


def _redacted(data: str) -> int:
    """Redacted reasoning is base64 of encrypted text that the model reads decrypted: three
    bytes per four characters, about four bytes a token."""
    return len(data) * 3 // 16


def _render_input(value: dict[str, Any], profile: TokenProfile) -> str:
    if profile.tool_call_rendering == "json":
        return _compact(value)
    return "".join(
        f'<parameter name="{key}">{arg if isinstance(arg, str) else _compact(arg)}</parameter>\n'
        for key, arg in value.items()
    )


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _current_turn_start(messages: list[Message]) -> int:
    """The index just after the last user message that is not only tool results: where the
    assistant turn in progress starts, whose reasoning the provider keeps."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is Role.USER and not all(
            isinstance(block, ToolResultBlock) for block in message.content
        ):
            return index + 1
    return 0


# Tool definitions -----------------------------------------------------------------------------

_TS_OPEN = "namespace functions {\n\n"
_TS_CLOSE = "} // namespace functions"


def _render_tool(tool: ToolDefinition, profile: TokenProfile) -> str:
    return _rendered(tool, profile.tool_rendering == "typescript")


def _tool_tokens(tool: ToolDefinition, profile: TokenProfile) -> int:
    """The tokens of ``tool``'s text under ``profile``, counted once per schema object and
    profile object (metis/model/schema_forms.py; the profile held with the count, so that
    another profile made where one was forgotten is never given its count)."""
    key = ("tokens", id(profile), tool.name, tool.description)
    kept, tokens = form(
        tool.input_schema,
        key,
        lambda _: (profile, count_text(_render_tool(tool, profile), profile)),
    )
    return tokens if kept is profile else count_text(_render_tool(tool, profile), profile)
