"""A name put in a URL's path as one segment of it (a model, a batch's id, a file's id)."""

from __future__ import annotations

import functools
from urllib.parse import quote


@functools.lru_cache(maxsize=256)
def segment(name: str) -> str:
    """``name`` percent-encoded so it stays one path segment: a ``/``, ``?``, ``#`` or ``%`` in
    it (``../files/x``, ``m?key=``) can name no other path, query or fragment of the API the
    request is signed for. ``@`` and ``:`` stay as they are (Vertex AI's ``claude-x@2025``,
    Bedrock's ``...-v1:0``); a lone surrogate is sent as its UTF-8 bytes would be."""
    return quote(name, safe="@:", errors="surrogatepass")
