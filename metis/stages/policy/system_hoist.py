"""system_hoist: gather every system instruction into ``request.system_prompt``.

``system_prompt`` first, then each SYSTEM message in order, joined with a blank line; the
encoders place the result where their provider wants it.
"""

from __future__ import annotations

from metis.model.content import Role, TextBlock
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage


class SystemHoist(RequestStage[CanonicalRequest]):
    name = "system_hoist"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        has_system_messages = call.history(request.messages).system
        prompt = request.system_prompt
        if not has_system_messages and (prompt is None or prompt.strip()):
            return request
        parts = [prompt] if prompt else []
        for index, message in enumerate(request.messages):
            if message.role is not Role.SYSTEM:
                continue
            for block in message.content:
                if isinstance(block, TextBlock):
                    parts.append(block.text)
                else:
                    where = message.id or f"messages[{index}]"
                    call.warn_dropped(block.type, "system messages hold text only", where)
        joined = "\n\n".join(p for p in parts if p.strip())
        return request.model_copy(
            update={
                "system_prompt": joined or None,
                "messages": [m for m in request.messages if m.role is not Role.SYSTEM],
            }
        )
