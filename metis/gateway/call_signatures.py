"""Tool calls' thought signatures (Gemini 3's) kept for the clients that do not send them back
(docs/gateway.md): a Messages or Responses client is handed the call alone, by its id, and
sends it back alone, so the gateway keeps each signature in its store (in memory, or in Redis,
where any replica finds it) under the call's id and gives it back when the client's history
carries that call again. A Chat client is handed it on the call itself (``extra_content``:
:func:`metis.gateway.provenance.call_signature`), which most Chat clients drop when they send
the call back: its calls' signatures are kept the same way, and a call that comes back with
its ``extra_content`` keeps the one it carries."""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from typing import Any

from metis.core.ids import TOOL_ID_PREFIX
from metis.gateway.provenance import each_block, unwrap, wrap
from metis.gateway.store import Owner
from metis.model.content import ContentBlock, Message, ToolUseBlock
from metis.wire.openai_chat.tool_calls import SIGNATURE

log = logging.getLogger("metis.gateway")

KEPT_IN_MEMORY = 4096
"""The calls whose signatures a gateway without Redis keeps (the oldest forgotten first)."""


class CallSignatures:
    """Each signed call's signature (with its maker) by its key and id, in this process."""

    def __init__(self, capacity: int = KEPT_IN_MEMORY) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[tuple[Owner, str], str] = OrderedDict()

    async def keep(self, owner: Owner, found: dict[str, str]) -> None:
        for call_id, sealed in found.items():
            self._kept[owner, call_id] = sealed
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    async def find(self, owner: Owner, call_ids: list[str]) -> dict[str, str]:
        kept = ((call_id, self._kept.get((owner, call_id))) for call_id in call_ids)
        return {call_id: sealed for call_id, sealed in kept if sealed is not None}


class RedisCallSignatures:
    """The same in Redis, each kept ``seconds`` (the stored responses' time), so any replica
    gives a call back its signature."""

    def __init__(self, client: Any, seconds: int, prefix: str = "metis:gateway:signatures:"):
        self.client, self.seconds, self.prefix = client, seconds, prefix

    def _key(self, owner: Owner, call_id: str) -> str:
        return f"{self.prefix}{hashlib.sha256(owner.encode()).hexdigest()[:32]}:{call_id}"

    async def keep(self, owner: Owner, found: dict[str, str]) -> None:
        try:
            for call_id, sealed in found.items():
                await self.client.set(self._key(owner, call_id), sealed, ex=self.seconds)
        except Exception:  # the answer is the caller's still; only its next turn loses them
            log.exception(
                "gateway could not keep the thought signatures of calls %s",
                ", ".join(found),
                extra={"event": "metis.gateway.store_failed"},
            )

    async def find(self, owner: Owner, call_ids: list[str]) -> dict[str, str]:
        try:
            kept = await self.client.mget([self._key(owner, i) for i in call_ids])
        except Exception:  # the calls go as a foreign model's would (Gemini's bypass value)
            log.exception(
                "gateway could not read the thought signatures of calls %s",
                ", ".join(call_ids)[:200],
                extra={"event": "metis.gateway.store_failed"},
            )
            return {}
        return {
            call_id: sealed.decode() if isinstance(sealed, bytes) else sealed
            for call_id, sealed in zip(call_ids, kept, strict=True)
            if isinstance(sealed, str | bytes)
        }


SignatureStore = CallSignatures | RedisCallSignatures


def signed(content: list[ContentBlock]) -> dict[str, str]:
    """The reply's tool calls that carry a thought signature: their ids, each with its
    signature and maker (as :func:`metis.gateway.provenance.wrap` writes them)."""
    found: dict[str, str] = {}
    for block in content:
        if not isinstance(block, ToolUseBlock) or block.provider_raw is None:
            continue
        signature = block.provider_raw.data.get(SIGNATURE)
        if isinstance(signature, str) and signature:
            found[block.id] = wrap(block.provider_raw, signature, {})
    return found


async def keep_signed(store: SignatureStore, owner: str, content: list[ContentBlock]) -> None:
    """The thought signatures of a reply's calls kept under the calls' ids (none: nothing)."""
    if found := signed(content):
        await store.keep(owner, found)


async def restore_signed(
    store: SignatureStore, owner: str, messages: list[Message]
) -> list[Message]:
    """``messages`` with each tool call the gateway handed out with a thought signature kept
    (:func:`keep_signed`) given it back as its maker keeps it; the calls a client sent back
    with their signature (a Chat client's), or that were never signed, as they are."""
    asked = [
        block.id
        for message in messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
        and block.provider_raw is None
        and block.id.startswith(TOOL_ID_PREFIX)
    ]
    if not asked:
        return messages
    kept = await store.find(owner, asked)
    makers = {}
    for call_id, sealed in kept.items():
        made_by, signature = unwrap(sealed)
        if made_by is not None and signature:
            makers[call_id] = made_by.model_copy(update={"data": {SIGNATURE: signature}})
    if not makers:
        return messages

    def given(block: Any) -> Any:
        if isinstance(block, ToolUseBlock) and block.provider_raw is None and block.id in makers:
            return block.model_copy(update={"provider_raw": makers[block.id]})
        return block

    return each_block(messages, given)
