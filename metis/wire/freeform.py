"""A freeform (custom) tool call's text as the canonical input ``{"input": "<text>"}``
(docs/contract.md §10), written as JSON fragments so that a streamed call's input deltas are
its arguments like any other call's: the opening, each piece of text escaped, the closing. A
call cut off before its closing is left with arguments that do not parse, as any cut-off call.
"""

from __future__ import annotations

import json

OPENING = '{"input":"'
CLOSING = '"}'


def text_fragment(text: str) -> str:
    """``text`` as it goes inside the JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def whole_input(text: str) -> str:
    """A whole call's text as its arguments."""
    return OPENING + text_fragment(text) + CLOSING
