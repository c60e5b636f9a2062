"""An image given by a provider's file id, end to end on the emulator (docs/contract.md §9): a
question about it on each provider that takes one, the image sent by its id and accepted; and the
emulator's refusals of an id its API would refuse, in the API's words (an id it did not issue,
and Chat Completions' image part, which has no file id)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from metis.model import CanonicalRequest, ImageBlock, Message
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator

from .. import stack_table as platforms

pytestmark = [
    pytest.mark.usefixtures("no_backoff"),  # retries are not waited for
    pytest.mark.backend_independent,  # wire formats checked against the emulator
]

BY_PROVIDER = {
    "anthropic": ("file_011CNha8iCJcU1wXNR6q4V8w", None),
    "openai_responses": ("file-6F2ksmvXxt4VdoqmHRw6kL", None),
    "gemini": ("files/abc123", "image/png"),
    "bedrock": ("s3://my-bucket/charts/q3.png", None),
}


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(BY_PROVIDER))
async def test_an_image_by_file_id_is_taken_where_the_provider_issued_it(
    stack: str, emulator: Emulator
) -> None:
    file_id, media_type = BY_PROVIDER[stack]
    image = ImageBlock.from_file_id(file_id, provider=stack, media_type=media_type)
    adapter = platforms.adapter(stack, emulator, InMemoryToolIdStore())
    request = CanonicalRequest(
        model=platforms.MODELS[stack],
        messages=[Message.user("What does the chart show?", image)],
        max_output_tokens=64,
    )
    with anyio.fail_after(20):
        reply = await adapter.complete(request)
    assert reply.text and reply.warnings == []
    (sent,) = emulator.requests
    assert file_id.encode() in sent.body


async def _refused(url: str, body: dict[str, Any], headers: dict[str, str]) -> str:
    async with httpx.AsyncClient() as client:
        reply = await client.post(url, json=body, headers=headers)
    assert reply.status_code == 400, reply.text
    return reply.text


@pytest.mark.anyio
async def test_the_emulator_refuses_an_image_id_the_api_would(emulator: Emulator) -> None:
    foreign = {"type": "image", "source": {"type": "file", "file_id": "file-6F2ks"}}
    anthropic = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "?"}, foreign]}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    url = emulator.base_url("anthropic") + "/v1/messages"
    assert "File not found: file-6F2ks" in await _refused(url, anthropic, headers)
    bearer = {"authorization": "Bearer k"}
    part = {"type": "input_image", "file_id": "file_011CNha8"}
    responses = {"model": "gpt-5", "input": [{"role": "user", "content": [part]}]}
    url = emulator.base_url("openai") + "/v1/responses"
    assert "No such File object: file_011CNha8" in await _refused(url, responses, bearer)
    by_id = {"type": "image_url", "image_url": {"file_id": "file-6F2ks"}}
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": [by_id]}]}
    url = emulator.base_url("openai") + "/v1/chat/completions"
    said = await _refused(url, chat, bearer)
    assert "messages[0].content[0].image_url.url" in said
