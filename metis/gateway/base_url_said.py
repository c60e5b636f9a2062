"""What a 404 of a path the gateway does not serve says when the path shows the client's base
URL wrong (docs/gateway.md "Limits and safety"): an OpenAI client given the gateway's bare
address (``/chat/completions``, which the gateway serves at ``/v1/chat/completions``), or an
Anthropic client given ``.../v1``, which its SDK adds itself (``/v1/v1/messages``)."""

from __future__ import annotations

SERVED_UNDER_V1 = ("/chat/completions", "/responses", "/embeddings", "/models")
"""The OpenAI APIs' paths, as a client whose base URL misses ``/v1`` asks for them."""


def base_url_said(path: str) -> str:
    """The words to add to the 404 of ``path`` ("" when the path says nothing of the base
    URL)."""
    if path.startswith("/v1/v1/"):
        return (
            ": the client's base URL ends in /v1, which its SDK adds itself: give the gateway's "
            "address alone (an Anthropic client's base URL has no /v1)"
        )
    if path.startswith(SERVED_UNDER_V1):
        return f": this gateway serves it at /v1{path}: an OpenAI client's base URL ends in /v1"
    return ""
