"""A name metis puts in a URL's path (a model, a batch's or a file's id) stays one segment of it:
a model named ``../files/x#`` or ``m?alt=json`` sent the request, with the adapter's key, to
another path or query of the provider's API (the Gemini and Vertex AI stacks put the model in
the path; Bedrock's already escaped it), and a batch id given by an application's user did the
same to the batch API (``GET /v1/batches/../files/file-x`` is ``GET /v1/files/file-x``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.adapter.batches import Batches
from metis.errors import AdapterError
from metis.model import CanonicalRequest, Message

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]

ODD = "../files/x?alt=json#"


def recorded(stack: str, **config: Any) -> tuple[Any, list[httpx.URL]]:
    seen: list[httpx.URL] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(500, json={"error": {"message": "no"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return build_adapter(stack, http_client=client, max_retries=0, **config), seen


@pytest.mark.parametrize(
    ("stack", "config", "root"),
    [
        ("gemini", {}, "/v1beta/models/"),
        ("vertex", {"settings": {"project": "p", "location": "us-east5"}}, "/models/"),
    ],
)
async def test_a_model_name_stays_one_segment_of_the_path(
    stack: str, config: dict[str, Any], root: str
) -> None:
    adapter, seen = recorded(stack, api_key="k", **config)
    request = CanonicalRequest(model=ODD, messages=[Message.user("hi")], max_output_tokens=9)
    with pytest.raises(AdapterError):
        await adapter.complete(request)
    (url,) = seen
    assert (
        url.raw_path.decode().split(root, 1)[1] == "..%2Ffiles%2Fx%3Falt%3Djson%23:generateContent"
    )
    assert url.query == b"" and url.fragment == ""


async def test_a_model_name_of_the_usual_characters_is_as_it_was() -> None:
    settings = {"project": "p", "location": "us-east5"}
    adapter, seen = recorded("vertex_anthropic", api_key="k", settings=settings)
    request = CanonicalRequest(
        model="claude-sonnet-4-5@20250929", messages=[Message.user("hi")], max_output_tokens=9
    )
    with pytest.raises(AdapterError):
        await adapter.complete(request)
    assert seen[0].raw_path.decode().endswith("/models/claude-sonnet-4-5@20250929:rawPredict")


@pytest.mark.parametrize(
    ("stack", "root"),
    [("openai", "/v1/batches/"), ("anthropic", "/v1/messages/batches/"), ("gemini", "/batches/")],
)
async def test_a_batch_id_stays_one_segment_of_the_path(stack: str, root: str) -> None:
    adapter, seen = recorded(stack, api_key="k")
    with pytest.raises(AdapterError):
        await Batches(adapter).status("../files/file-x")
    assert seen[0].raw_path.decode().endswith(root + "..%2Ffiles%2Ffile-x")
