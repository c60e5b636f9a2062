"""Tool names a provider refuses, sent under names it takes, for the ``tool_ids`` stage.

A canonical tool name is any text; each provider takes its own set (Anthropic, OpenAI and
Bedrock ``[a-zA-Z0-9_-]{1,64}``; Gemini also ``.`` and ``:``, but a letter or ``_`` first). A
conversation that moves between providers keeps the names the application gave: where one
breaks the provider's rule (``0`` at Gemini, ``files.read`` at Anthropic), the call sends the
tools, the tool choice and the history's calls under a name that keeps the rule, and the
reply's calls come back under the name the application gave. The derived name is the same on
every call (the characters the rule refuses become ``_``, a ``_`` goes first where the first is
refused, and a hash of the name ends it where it is cut or would be another tool's name).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import partial

from metis.model.content import ContentBlock, Message, ToolUseBlock
from metis.model.history import History
from metis.model.request import CanonicalRequest
from metis.model.updated import updated
from metis.stages.options import ToolNameRule

_HASH = 6
"""The hex digits of the hash that ends a cut or colliding name."""


@dataclass(frozen=True, slots=True)
class NameRule:
    """A :class:`ToolNameRule`, compiled."""

    valid: re.Pattern[str]
    refused: re.Pattern[str]
    first: re.Pattern[str] | None
    max_length: int

    @classmethod
    def of(cls, rule: ToolNameRule) -> NameRule:
        chars, most = rule.chars, rule.max_length
        if rule.first is None:
            return cls(re.compile(f"[{chars}]{{1,{most}}}"), re.compile(f"[^{chars}]"), None, most)
        first = re.compile(f"[{rule.first}]")
        valid = re.compile(f"[{rule.first}][{chars}]{{0,{most - 1}}}")
        return cls(valid, re.compile(f"[^{chars}]"), first, most)

    def takes(self, name: str) -> bool:
        return self.valid.fullmatch(name) is not None


def provider_names(request: CanonicalRequest, history: History, rule: NameRule) -> dict[str, str]:
    """Each name of the request's tools, tool choice and history's calls that ``rule`` refuses,
    and the name it is sent under; empty when the rule takes them all (the usual case)."""
    called = history.kept(("tool_names", "called"), partial(_called, request.messages, history))
    names = {tool.name for tool in request.tools} | called
    if request.tool_choice is not None and request.tool_choice.name is not None:
        names.add(request.tool_choice.name)
    refused = sorted(name for name in names if not rule.takes(name))
    if not refused:
        return {}
    taken = names.difference(refused)
    out: dict[str, str] = {}
    for name in refused:
        sent = _derived(name, rule, taken)
        taken.add(sent)
        out[name] = sent
    return out


def _called(messages: list[Message], history: History) -> frozenset[str]:
    return frozenset(
        block.name
        for i in history.tools_at
        for block in messages[i].content
        if isinstance(block, ToolUseBlock)
    )


def _derived(name: str, rule: NameRule, taken: set[str]) -> str:
    """A name ``rule`` takes for ``name``, none of ``taken``, the same on every call."""
    mended = rule.refused.sub("_", name) or "_"
    if rule.first is not None and not rule.first.match(mended):
        mended = "_" + mended
    if len(mended) <= rule.max_length and mended not in taken:
        return mended
    digest = hashlib.sha256(name.encode()).hexdigest()
    for n in range(_HASH, len(digest) + 1):
        candidate = f"{mended[: rule.max_length - n - 1]}_{digest[:n]}"
        if candidate not in taken:
            return candidate
    raise AssertionError("a sha-256 digest names one name")  # pragma: no cover


def renamed(request: CanonicalRequest, names: dict[str, str], history: History) -> CanonicalRequest:
    """``request`` with each of ``names`` (given -> sent) sent under its new name."""
    tools = [
        updated(tool, name=names[tool.name]) if tool.name in names else tool
        for tool in request.tools
    ]
    choice = request.tool_choice
    if choice is not None and choice.name in names:
        choice = updated(choice, name=names[choice.name])
    messages = list(request.messages)
    for i in history.tools_at:
        content = [_sent(block, names) for block in messages[i].content]
        if any(a is not b for a, b in zip(content, messages[i].content, strict=True)):
            messages[i] = updated(messages[i], content=content)
    return updated(request, tools=tools, tool_choice=choice, messages=messages)


def _sent(block: ContentBlock, names: dict[str, str]) -> ContentBlock:
    if isinstance(block, ToolUseBlock) and block.name in names:
        return updated(block, name=names[block.name])
    return block


def given_names(content: list[ContentBlock], back: dict[str, str]) -> list[ContentBlock]:
    """``content`` with each call's name as the application gave it (``back``: sent ->
    given)."""
    return [
        updated(block, name=back[block.name])
        if isinstance(block, ToolUseBlock) and block.name in back
        else block
        for block in content
    ]
