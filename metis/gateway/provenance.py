"""Who wrote a thinking block, carried through a client (docs/gateway.md).

A signature (and redacted thinking's data) is good only with the provider and model that
made it (docs/contract.md §7); a client of the gateway sends it back with no word of which
model that was. The gateway writes the maker into the signature it hands out
(``metis1.<provider and model, base64url>.<signature>``) and reads it back, so the block
returns to its maker whichever model took the turns between, and goes nowhere else.

Where the maker takes its thinking back only with its own id for it (an OpenAI reasoning
item's ``id``), that id is written in beside the maker, so it survives a client whose API has
no place for it (an Anthropic thinking block): only the maker's codec reads it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from metis.model.content import (
    Message,
    ProviderRaw,
    RedactedThinkingBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.wire.json_limits import loads
from metis.wire.openai_chat.tool_calls import SIGNATURE

PREFIX = "metis1."
CARRIED = ("id",)
"""What of the maker's record of a block (``provider_raw.data``) its signature carries."""
THINKING = "thinking"
"""The tag's member carrying the block's text, where the client was given no summary."""


@functools.lru_cache(maxsize=512)
def maker(provider: str, model: str) -> ProviderRaw:
    """``provider``'s ``model`` as the maker of what a stream writes: one (frozen) object for
    every request to it, not one made, and held, per request."""
    return ProviderRaw(provider=provider, model=model)


def wrap(made_by: ProviderRaw | None, opaque: str, data: Mapping[str, Any] | None = None) -> str:
    """``opaque`` with its maker written in, and what of ``data`` (the maker's record of the
    block; ``made_by.data`` when not given) the maker needs to take it back."""
    if made_by is None or not opaque:
        return opaque
    record = made_by.data if data is None else data
    kept = {key: record[key] for key in CARRIED if isinstance(record.get(key), str)}
    tag: list[Any] = (
        [made_by.provider, made_by.model, kept] if kept else [made_by.provider, made_by.model]
    )
    return _written(tag, opaque)


def unsigned(made_by: ProviderRaw | None) -> str:
    """The signature of a thinking block its maker gave none (Gemini's thought summaries): the
    maker alone, so the block goes back to it and nowhere else, as a signed one does. Handed
    out empty, it would read as the client's own and go to an Anthropic model, which refuses
    it ("" when the maker is not known: a route's stream)."""
    return "" if made_by is None else _written([made_by.provider, made_by.model], "")


def _written(tag: list[Any], opaque: str) -> str:
    """``opaque`` behind its tag, as :func:`_tagged` reads it."""
    maker = json.dumps(tag, separators=(",", ":")).encode()
    return f"{PREFIX}{base64.urlsafe_b64encode(maker).decode().rstrip('=')}.{opaque}"


def _tagged(given: str) -> tuple[list[Any], str] | None:
    """The tag (provider, model and maybe the carried record) and the provider's own value of
    a wrapped value; None when ``given`` is not one."""
    if not given.startswith(PREFIX):
        return None
    tag, dot, opaque = given[len(PREFIX) :].partition(".")
    try:
        read = loads(base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4)))
    except (ValueError, binascii.Error, TypeError):
        return None
    return (read, opaque) if dot and isinstance(read, list) and len(read) >= 2 else None


def with_thinking(sealed: str, thinking: str) -> str:
    """``sealed`` (a wrapped signature) carrying its block's text in its tag, for a client
    that is given no summary of it (docs/gateway.md); ``sealed`` when it names no maker."""
    tagged = _tagged(sealed) if thinking else None
    if tagged is None:
        return sealed
    (provider, model, *more), opaque = tagged
    record = {**(more[0] if more and isinstance(more[0], dict) else {}), THINKING: thinking}
    return _written([provider, model, record], opaque)


def carried_thinking(sealed: str) -> str | None:
    """The text :func:`with_thinking` put in ``sealed``; None when it carries none."""
    tagged = _tagged(sealed)
    more = tagged[0][2:] if tagged is not None else []
    text = more[0].get(THINKING) if len(more) == 1 and isinstance(more[0], dict) else None
    return text if isinstance(text, str) else None


def unwrap(given: str) -> tuple[ProviderRaw | None, str]:
    """The maker and the provider's own value; (None, ``given``) when it carries no maker."""
    tagged = _tagged(given)
    if tagged is None:
        return None, given
    (provider, model, *more), opaque = tagged
    if not isinstance(provider, str) or not isinstance(model, str | None):
        return None, given
    data = more[0] if len(more) == 1 and isinstance(more[0], dict) else {}
    if (more and not data) or not all(isinstance(data.get(key, ""), str) for key in CARRIED):
        return None, given
    kept = {key: data[key] for key in CARRIED if key in data}
    return ProviderRaw(provider=provider, model=model, data=kept), opaque


def same_maker(found: ProviderRaw, made_by: ProviderRaw) -> bool:
    """Whether a block ``found`` made (by :func:`unwrap`) is ``made_by``'s."""
    return (found.provider, found.model) == (made_by.provider, made_by.model)


def restored(messages: list[Message]) -> list[Message]:
    """``messages`` with each thinking block the gateway handed out given back its maker."""
    return each_block(messages, _restored)


def each_block(messages: list[Message], change: Callable[[Any], Any]) -> list[Message]:
    """``messages`` with ``change`` applied to every block; a message none of whose blocks it
    changed (returned as they were) is kept as it was, not copied."""
    out = []
    for message in messages:
        content = [change(block) for block in message.content]
        changed = any(new is not old for new, old in zip(content, message.content, strict=True))
        out.append(message.model_copy(update={"content": content}) if changed else message)
    return out


def _restored(block: object) -> object:
    if isinstance(block, ThinkingBlock) and block.signature:
        maker, signature = unwrap(block.signature)
        if maker is not None:
            return block.model_copy(update={"signature": signature, "provider_raw": maker})
    if isinstance(block, RedactedThinkingBlock):
        maker, data = unwrap(block.data)
        if maker is not None:
            return block.model_copy(update={"data": data, "provider_raw": maker})
    return block


def call_signature(block: ToolUseBlock) -> dict[str, Any]:
    """A tool call's thought signature (Gemini's) with its maker written in, where Gemini's
    OpenAI-compatible endpoint puts it on a Chat call (``extra_content.google``); nothing for
    a call without one."""
    raw = block.provider_raw
    signature = raw.data.get(SIGNATURE) if raw is not None else None
    if raw is None or not isinstance(signature, str) or not signature:
        return {}
    return {"extra_content": {"google": {"thought_signature": wrap(raw, signature, {})}}}


def signed_calls(messages: list[Message], turns: Any, ignored: list[str]) -> list[Message]:
    """``messages`` with each tool call the gateway handed out with a thought signature
    (:func:`call_signature`, in the Chat ``turns`` they were read from) given it back as its
    maker keeps it; a signature the gateway did not write goes to no model and is named in
    ``ignored``."""
    found: dict[str, ProviderRaw] = {}
    for i, turn in enumerate(turns if isinstance(turns, list) else ()):
        calls = turn.get("tool_calls") if isinstance(turn, Mapping) else None
        for k, call in enumerate(calls if isinstance(calls, list) else ()):
            extra = call.get("extra_content") if isinstance(call, Mapping) else None
            google = extra.get("google") if isinstance(extra, Mapping) else None
            sealed = google.get("thought_signature") if isinstance(google, Mapping) else None
            if not extra or sealed == "":
                continue
            made_by, signature = unwrap(sealed) if isinstance(sealed, str) else (None, "")
            if made_by is None or not signature or not isinstance(call.get("id"), str):
                ignored.append(f"messages[{i}].tool_calls[{k}].extra_content")
                continue
            record = {SIGNATURE: signature}
            found[call["id"]] = made_by.model_copy(update={"data": record})

    def given(block: object) -> object:
        if isinstance(block, ToolUseBlock) and block.provider_raw is None and block.id in found:
            return block.model_copy(update={"provider_raw": found[block.id]})
        return block

    return each_block(messages, given) if found else messages
