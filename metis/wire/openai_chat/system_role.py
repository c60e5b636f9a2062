"""o1-mini and o1-preview take no system or developer message on Chat Completions (a 400:
"Unsupported value: 'messages[0].role' does not support 'system' with this model.",
pydantic/pydantic-ai's test_openai_o1_mini_system_role cassettes): their instructions go at the
start of the first user message instead."""

from __future__ import annotations

import re
from typing import Any

from metis.wire.codec import EncodeContext

NO_SYSTEM_ROLE = re.compile(r"(?:^|/)o1-(?:mini|preview)")
"""The wire models that refuse a system or developer message (a provider's prefix allowed)."""


def system_in_user(messages: list[dict[str, Any]], call: EncodeContext) -> list[dict[str, Any]]:
    """``messages`` with their system and developer messages moved into the first user
    message, for a model that takes neither; as they are for any other."""
    if not NO_SYSTEM_ROLE.search(call.wire_model):
        return messages
    system = [m for m in messages if m.get("role") in ("system", "developer")]
    if not system:
        return messages
    text = "\n\n".join(t for t in (_text(m.get("content")) for m in system) if t.strip())
    rest = [m for m in messages if m.get("role") not in ("system", "developer")]
    call.warn_dropped(
        "system prompt",
        f"{call.wire_model} takes no system or developer message: its text opens the first "
        "user message",
    )
    first = next((i for i, m in enumerate(rest) if m.get("role") == "user"), None)
    if not text:
        return rest
    if first is None:
        return [{"role": "user", "content": text}, *rest]
    user = dict(rest[first])
    content = user.get("content")
    if isinstance(content, list):
        user["content"] = [{"type": "text", "text": text}, *content]
    else:
        user["content"] = f"{text}\n\n{content}" if content else text
    rest[first] = user
    return rest


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (p.get("text") for p in content if isinstance(p, dict))
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""
