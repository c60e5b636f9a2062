"""thinking_turn: a tool loop that began without thinking finishes without it (Anthropic).

Anthropic keeps one thinking setting per assistant turn, and a tool loop is one turn: with
thinking on, the first assistant message of a loop still in progress must start with a
thinking block, or the request is refused (400 "a final assistant message must start with a
thinking block"). That block is missing whenever the loop began on another provider or on a
turn without thinking, so such a request goes without thinking, with one structured WARN,
until the loop closes (the next user message); then thinking is on again.
"""

from __future__ import annotations

import dataclasses

from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import RequestStage
from metis.wire.anthropic.rules import open_turn_start, starts_with_thinking


class ThinkingTurn(RequestStage[WireRequest]):
    name = "thinking_turn"
    role = "edit"

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        thinking = request.body.get("thinking")
        if not isinstance(thinking, dict) or thinking.get("type") == "disabled":
            return request
        messages = request.body.get("messages")
        first = open_turn_start(messages)
        if first is None or starts_with_thinking(messages[first]):  # type: ignore[index]
            return request
        call.warn_dropped(
            "thinking",
            "thinking is off for this request: the tool loop in progress began without a "
            "thinking block (on another provider or model, or with thinking off), and "
            "Anthropic keeps one thinking setting per assistant turn; it is on again once the "
            "loop closes",
            message_id=f"messages.{first}",
        )
        body = {key: value for key, value in request.body.items() if key != "thinking"}
        return dataclasses.replace(request, body=body)
