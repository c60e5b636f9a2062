"""The ``include_usage`` stage: ask OpenAI Chat for token usage on a streamed call.

OpenAI sends a streamed call's usage only when ``stream_options.include_usage`` is set, in one
last chunk with no choices. A call that is not streamed reports usage anyway, and OpenAI
rejects ``stream_options`` without ``stream``, so such a body is left as it is.
"""

from __future__ import annotations

import dataclasses

from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import RequestStage


class IncludeUsage(RequestStage[WireRequest]):
    name = "include_usage"
    role = "edit"

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        if not request.stream:
            return request
        existing = request.body.get("stream_options")
        options = existing if isinstance(existing, dict) else {}
        if options.get("include_usage") is True:
            return request
        body = {**request.body, "stream_options": {**options, "include_usage": True}}
        return dataclasses.replace(request, body=body)
