"""system_hoist: gather every system instruction into ``request.system_prompt``.

``system_prompt`` first, then each SYSTEM message in order, joined with a blank line; the
encoders place the result where their provider wants it. For a model that takes no system
prompt (its catalog entry or stack says so), capability_check folds the same text into the
first user turn instead (:func:`fold_system`), before this stage runs.
"""

from __future__ import annotations

from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Message, Role, TextBlock
from metis.model.history import History, history_of
from metis.model.media_fit import Drop
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage

NO_SYSTEM_PROMPT = "the model takes no system prompt: its text opens the first user turn"


class SystemHoist(RequestStage[CanonicalRequest]):
    name = "system_hoist"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        has_system_messages = call.history(request.messages).system
        prompt = request.system_prompt
        if not has_system_messages and (prompt is None or prompt.strip()):
            return request
        joined, messages = system_text(request, call.warn_dropped)
        return request.model_copy(update={"system_prompt": joined or None, "messages": messages})


def system_text(request: CanonicalRequest, drop: Drop) -> tuple[str, list[Message]]:
    """The request's system text (``system_prompt``, then each SYSTEM message's text, joined
    with a blank line) and its messages without the SYSTEM ones; a system message's block
    that is not text is reported to ``drop``."""
    parts = [request.system_prompt] if request.system_prompt else []
    for index, message in enumerate(request.messages):
        if message.role is not Role.SYSTEM:
            continue
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            else:
                where = message.id or f"messages[{index}]"
                drop(block.type, "system messages hold text only", where)
    joined = "\n\n".join(p for p in parts if p.strip())
    return joined, [m for m in request.messages if m.role is not Role.SYSTEM]


def fold_system(
    request: CanonicalRequest,
    caps: AdapterCapabilities,
    drop: Drop,
    history: History | None = None,
) -> CanonicalRequest:
    """``request`` for a model that takes no system prompt (``caps``): its system text opens
    the first user turn (a user turn of its own when there is none), reported to ``drop`` as
    a ``system prompt``; as it is for any other model, or when it has no system text."""
    if caps.supports_system_prompt:
        return request
    if not request.system_prompt and not (history or history_of(request.messages)).system:
        return request
    text, messages = system_text(request, drop)
    drop("system prompt", NO_SYSTEM_PROMPT, None)
    if text:
        messages = into_first_user_turn(messages, text)
    return request.model_copy(update={"system_prompt": None, "messages": messages})


def into_first_user_turn(messages: list[Message], note: str) -> list[Message]:
    """For a model that takes no system prompt: ``note`` opens the first user turn."""
    for i, message in enumerate(messages):
        if message.role is Role.USER:
            content = list(message.content)
            if content and isinstance(content[0], TextBlock):
                content[0] = TextBlock(text=f"{note}\n\n{content[0].text}")
            else:
                content.insert(0, TextBlock(text=note))
            return [
                *messages[:i],
                message.model_copy(update={"content": content}),
                *messages[i + 1 :],
            ]
    return [Message.user(note), *messages]
