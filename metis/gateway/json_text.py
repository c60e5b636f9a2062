"""JSON the gateway writes, in UTF-8, whatever a provider put in its strings.

A JSON ``"\\ud83d"`` escape alone reads as a lone UTF-16 surrogate, a ``str`` with no UTF-8
form. A client's body holding one is refused as it is read (metis.gateway.body) and the
library's canonical values hold none (each is U+FFFD), so only what the gateway passes on
from a provider can: a relayed event or reply, an upstream error's ``param``, a stored
response. It is written as the escape it came as, as a relayed event's own bytes keep it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse


def utf8(text: str) -> bytes:
    """JSON ``text`` in UTF-8, a lone surrogate in it written as its ``\\uXXXX`` escape."""
    try:
        return text.encode()
    except UnicodeEncodeError:  # only inside a string: json writes every other part in ASCII
        return text.encode("utf-8", "backslashreplace")


class JSONAnswer(JSONResponse):
    """Starlette's JSON response, its body written by :func:`utf8`."""

    def render(self, content: Any) -> bytes:
        return utf8(json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
