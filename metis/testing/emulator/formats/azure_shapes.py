"""What Azure OpenAI adds to OpenAI's Chat Completions, as its recordings show
(real-traffic/azure): the classic API's paths (the ``AzureOpenAI`` client's),
``/openai/deployments/{deployment}/chat/completions?api-version=...`` (and ``/embeddings``),
where the deployment in the URL names the model, and ``/openai/responses?api-version=...``;
a request to them without an ``api-version`` finds no resource; the content filter's verdicts
(``prompt_filter_results`` on the reply, ``content_filter_results`` on each choice), which a
stream sends first in a chunk of their own with no choices, no id and no model, then on each
choice of each chunk (the categories' verdicts on a chunk that carries text, an empty object
on the others: the first, which names the role, a tool call's, and the one that finishes);
and ``apim-request-id`` on every reply."""

from __future__ import annotations

from typing import Any

from metis.testing.emulator.formats.base import Call
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.wire import Frame, HttpRequest, request_uuid, sse

SAFE = {"filtered": False, "severity": "safe"}
UNDETECTED = {"filtered": False, "detected": False}
_PROTECTED = ("protected_material_code", "protected_material_text")
STREAMED_FILTERS = dict.fromkeys(("hate", "self_harm", "sexual", "violence"), SAFE)
"""A streamed chunk's verdicts on its content, as Azure's streams give them."""
PROMPT_FILTERS = dict(sorted({**STREAMED_FILTERS, "jailbreak": UNDETECTED}.items()))
CHOICE_FILTERS = dict(sorted({**STREAMED_FILTERS, **dict.fromkeys(_PROTECTED, UNDETECTED)}.items()))
DEPLOYMENT = r"/openai/deployments/(?P<deployment>[^/]+)"
"""A deployment's own paths (``.../chat/completions``, ``.../embeddings``), beside which the
classic API serves ``/openai/responses``: all of them with an ``api-version``."""


def classic_path(call: Call) -> None:
    """A request to the classic API (not ``/openai/v1/``): its ``api-version`` checked, and
    a deployment in the URL as the model, whatever the body names."""
    if "/openai/v1/" in call.request.path:
        return
    if not call.request.query.get("api-version"):
        raise Refused("Resource not found", status=404)
    deployment = call.match.groupdict().get("deployment")
    if deployment is not None:
        call.body["model"] = deployment


def apim_headers(request: HttpRequest) -> dict[str, str]:
    return {"apim-request-id": request_uuid(request)}


def filtered(rendered: dict[str, Any]) -> dict[str, Any]:
    """A whole reply with the filter's verdicts."""
    choices = [
        {**choice, "content_filter_results": CHOICE_FILTERS} for choice in rendered["choices"]
    ]
    prompt = [{"prompt_index": 0, "content_filter_results": PROMPT_FILTERS}]
    return {**rendered, "choices": choices, "prompt_filter_results": prompt}


def prompt_filter_chunk() -> Frame:
    """The chunk a stream starts with."""
    prompt = [{"prompt_index": 0, "content_filter_results": PROMPT_FILTERS}]
    return sse(
        {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": prompt,
        }
    )
