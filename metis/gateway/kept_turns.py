"""A Messages API client's turns read into canonical messages once per content.

An agent sends its whole conversation on every call: the system prompt and every earlier turn
again, each parsed anew from the body. Read into canonical messages, the same content gives
the same messages, so a turn read before is given as the very objects read then, and what the
library derives from a message object (its facts, its wire form, its token count, the record
of a history: :mod:`metis.model.memo`, :mod:`metis.model.history`) is found again instead of
derived for each request.

A turn is found by its exact content (its marshal form, version 2: every part's exact type,
no references that vary with refcounts) and the model name its thinking is marked with, and
given only while the messages read from it still hold what they held (:mod:`metis.model.held`).
Only a turn whose reading depends on nothing but its content is kept: text, images, thinking,
tool calls and tool results of text and images, whose tool ids are the gateway's own (a
``tu_`` id stays itself; another is mapped to a canonical id the request shares between a call
and its result, so such a turn is read with its request). A turn holding anything else (a
document, citations, a server tool's blocks, a block the reader reports as dropped) is read
each time, as before. At most ``KEPT_AT_MOST`` turns of up to ``KEPT_SIZE`` bytes are kept,
the least recently found going first, and a turn is kept the second time it is read: an agent
resends its turns, while a turn sent once (a conversation of one request, or more
conversations at once than the store holds) would cost its keeping and push out one that comes
again.
:func:`kept` is the store itself, shared with an OpenAI client's turns
(:mod:`metis.gateway.openai_kept`): each reader says what kind of turn it keeps and which of
its turns are plain.
"""

from __future__ import annotations

import marshal
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from metis.core.ids import TOOL_ID_PREFIX
from metis.gateway.provenance import maker
from metis.histories.anthropic import from_anthropic_system, from_anthropic_turn
from metis.histories.reading import history
from metis.model.block import ProviderRaw
from metis.model.content import ContentBlock, Message
from metis.model.held import Held, Unkeepable, of_message, unchanged

KEPT_AT_MOST = 1024
KEPT_ON_READ = 2
"""The read of a turn at which it is kept (the reads before only note it)."""
SEEN_AT_MOST = 8 * KEPT_AT_MOST
KEPT_SIZE = 16384
"""The largest turn kept, in bytes of its marshal form."""
PLAIN_BLOCKS = frozenset(
    {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)
RESULT_PARTS = frozenset({"text", "image"})

_Kept = tuple[tuple[Message, ...], tuple[tuple[ContentBlock, ...], ...], tuple[Held, ...]]
# Ordered dicts: a plain dict's oldest entry is found by scanning past every one deleted
# before it (next(iter(d)) after many pops from its front), an OrderedDict's at once.
_KEPT: OrderedDict[tuple[str, str | None, bytes], _Kept] = OrderedDict()
_SEEN: OrderedDict[int, int] = OrderedDict()  # turns read, not kept yet, by key hash: how often
Reader = Callable[[Any, str, Any, ProviderRaw], list[Message]]


def read_turns(raw: Any, system: Any, model: str | None, ids: Any) -> list[Message]:
    """``from_anthropic(raw, system=system, model=model, ids=ids)``, each turn (and the
    system prompt) read once per content."""
    made_by = ProviderRaw(provider="anthropic") if model is None else maker("anthropic", model)
    out: list[Message] = []
    if system:
        out += _read("system", system, model, _system, ids, made_by)
    for i, turn in enumerate(history(raw)):
        out += _read(f"messages[{i}]", turn, model, from_anthropic_turn, ids, made_by)
    return out


def _system(system: Any, where: str, ids: Any, made_by: ProviderRaw) -> list[Message]:
    return [from_anthropic_system(system, ids, made_by)]


def _read(
    where: str, turn: Any, model: str | None, read: Reader, ids: Any, made_by: ProviderRaw
) -> list[Message]:
    """``read(turn, where, ids, made_by)``, kept by the turn's content when it is plain."""
    system = where == "system"
    if not _plain({"content": turn} if system else turn):
        return read(turn, where, ids, made_by)
    kind = "anthropic.system" if system else "anthropic"
    return kept(kind, model, turn, lambda: read(turn, where, ids, made_by))


def kept(
    kind: str, model: str | None, turn: Any, read: Callable[[], list[Message]]
) -> list[Message]:
    """The messages ``read()`` makes of ``turn`` (JSON values: one item, or a run of items
    read together), the very ones made before for the same ``kind`` of turn, ``model`` and
    exact content while they hold what they held. The caller has found that reading ``turn``
    depends on nothing else."""
    try:
        key = (kind, model, marshal.dumps(turn, 2))
    except ValueError:  # not a JSON value (a client's body is parsed JSON: never)
        return read()
    found = _KEPT.get(key)
    if found is not None:
        if _intact(found):
            _KEPT.move_to_end(key)  # the most recently found, the last to go
            return list(found[0])
        del _KEPT[key]
    messages = read()
    if len(key[2]) <= KEPT_SIZE and _read_enough(key):
        try:
            held = tuple(of_message(m) for m in messages)
        except Unkeepable:
            return messages
        if len(_KEPT) >= KEPT_AT_MOST:
            _KEPT.popitem(last=False)
        _KEPT[key] = (tuple(messages), tuple(tuple(m.content) for m in messages), held)
    return messages


def _read_enough(key: tuple[str, str | None, bytes]) -> bool:
    """Whether this read of a turn is the one it is kept at (``KEPT_ON_READ``). Turns are
    counted by their key's hash (two that share one are counted together: kept a read early)."""
    seen = hash(key)
    reads = _SEEN.pop(seen, 0) + 1
    if reads >= KEPT_ON_READ:
        return True
    if len(_SEEN) >= SEEN_AT_MOST:
        _SEEN.popitem(last=False)
    _SEEN[seen] = reads
    return False


def own_id(value: Any) -> bool:
    """Whether a tool id is the gateway's own (kept as it is, whatever the request)."""
    return isinstance(value, str) and value.startswith(TOOL_ID_PREFIX)


def _intact(kept: _Kept) -> bool:
    """Whether the messages kept still hold the blocks they held, each holding what it held."""
    for message, blocks, held in zip(*kept, strict=True):
        content = message.content
        if tuple(content) != blocks or not unchanged(held, (content,)):
            return False
    return True


def _plain(turn: Any) -> bool:
    """Whether reading ``turn`` depends on its content alone (see the module's docstring)."""
    if not isinstance(turn, dict):
        return False
    content = turn.get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(_plain_block(block) for block in content)


def _plain_block(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if not isinstance(kind, str) or kind not in PLAIN_BLOCKS or block.get("citations"):
        return False
    if kind == "tool_use":
        return own_id(block.get("id"))
    if kind == "tool_result":
        inner = block.get("content", "")
        return own_id(block.get("tool_use_id")) and (
            isinstance(inner, str)
            or (isinstance(inner, list) and all(_plain_part(part) for part in inner))
        )
    return True


def _plain_part(part: Any) -> bool:
    kind = part.get("type") if isinstance(part, dict) else None
    return isinstance(kind, str) and kind in RESULT_PARTS and not part.get("citations")


def clear() -> None:
    """Forget every turn kept or seen (tests)."""
    _KEPT.clear()
    _SEEN.clear()
