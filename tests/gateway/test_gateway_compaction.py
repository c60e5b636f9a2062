"""Compaction blocks a client sends back through the gateway's translated path (docs/gateway.md):
each goes back as it came to the provider that made it, and is left out, and named in
``x-metis-dropped``, anywhere else (docs/contract.md §8), as the library does for a session.
The official SDKs are the clients; emulator-backed models are behind the gateway, and the
emulator checks what it is sent back (an Anthropic block's form, a Responses item's seal)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")

ROUTES = {
    "fallback": {"models": ["flash", "gpt"]},
    # a route whose target sets an option: the translated path to Anthropic (docs/gateway.md)
    "claude-first": {"models": [{"model": "sonnet", "options": {"temperature": 0.5}}, "gpt"]},
}
BLOCK = {"type": "compaction", "content": "Summary: the harbour was busy."}


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    yield Emulator()


@pytest.fixture(scope="module")
def url(emulator: Emulator) -> Iterator[str]:
    with serving(create_app(gateway_config(emulator, routes=ROUTES))) as (served, _):
        yield served


def upstream(emulator: Emulator, path: str, marker: str) -> dict[str, Any]:
    """The body the gateway sent upstream for the request whose last message is ``marker``."""
    bodies = [json.loads(r.body) for r in emulator.requests if r.path == path]
    found = [b for b in bodies if marker in json.dumps(b)]
    assert len(found) == 1, f"{len(found)} requests to {path} carry {marker!r}"
    return found[0]


def sealed_item(emulator: Emulator) -> dict[str, Any]:
    """A compaction item the emulator made (its ``encrypted_content`` sealed), as OpenAI's
    compact endpoint would hand a client."""
    body = {"model": "gpt-5", "input": [{"role": "user", "content": "Describe the harbour."}]}

    async def compact() -> httpx.Response:
        async with emulator.client() as client:
            return await client.post(
                "http://emulator/v1/responses/compact",
                json=body,
                headers={"authorization": "Bearer sk-upstream"},
            )

    answer = anyio.run(compact)
    answer.raise_for_status()
    (item,) = [i for i in answer.json()["output"] if i.get("type") == "compaction"]
    return dict(item)


def anthropic_history(marker: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Describe the harbour."},
        {"role": "assistant", "content": [BLOCK, {"type": "text", "text": "It was busy."}]},
        {"role": "user", "content": marker},
    ]


def test_an_anthropic_clients_compaction_block_goes_back_to_anthropic_as_it_came(
    claude: Any, emulator: Emulator
) -> None:
    marker = "And the boats? (1)"
    reply = claude.messages.with_raw_response.create(
        model="claude-first", max_tokens=100, messages=anthropic_history(marker)
    )
    assert reply.http_response.headers.get("x-metis-path") != "pass-through"
    assert reply.parse().content[0].text == f"You said: {marker}"
    sent = upstream(emulator, "/v1/messages", marker)
    assert sent["messages"][1]["content"][0] == BLOCK  # verbatim, in its place


@pytest.mark.parametrize("model", ["gpt5", "gpt", "flash"])
def test_an_anthropic_clients_compaction_block_is_left_out_elsewhere_and_named(
    model: str, claude: Any, emulator: Emulator
) -> None:
    marker = f"And the boats? ({model})"
    reply = claude.messages.with_raw_response.create(
        model=model, max_tokens=100, messages=anthropic_history(marker)
    )
    assert reply.parse().content[0].text == f"You said: {marker}"
    assert "'compaction' block from anthropic" in reply.http_response.headers["x-metis-dropped"]
    paths = {"gpt5": "/v1/responses", "gpt": "/v1/chat/completions"}
    path = paths.get(model, "/v1beta/models/gemini-2.5-flash:generateContent")
    sent = upstream(emulator, path, marker)
    assert "compaction" not in json.dumps(sent) and "Summary: the harbour" not in json.dumps(sent)


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_clients_compaction_item_goes_back_to_openai_as_it_came(
    stream: bool, oai: Any, emulator: Emulator
) -> None:
    item = sealed_item(emulator)
    marker = f"And the boats? (responses, {stream})"
    given = [{"role": "user", "content": "Describe the harbour."}, item]
    given.append({"role": "user", "content": marker})
    if stream:
        with oai.responses.stream(model="gpt5", input=given) as events:
            text = events.get_final_response().output_text
    else:
        text = oai.responses.create(model="gpt5", input=given).output_text
    assert text == f"You said: {marker}"
    sent = upstream(emulator, "/v1/responses", marker)
    assert [i.get("type", "message") for i in sent["input"]] == ["message", "compaction", "message"]
    assert sent["input"][1] == item  # verbatim: the emulator opened its seal


def test_a_responses_clients_compaction_item_is_left_out_elsewhere_and_named(
    oai: Any, emulator: Emulator
) -> None:
    item = sealed_item(emulator)
    marker = "And the boats? (responses to claude)"
    given = [{"role": "user", "content": "Describe the harbour."}, item]
    given.append({"role": "user", "content": marker})
    reply = oai.responses.with_raw_response.create(model="sonnet", input=given)
    assert reply.parse().output_text.endswith(marker)
    assert "'compaction' block from openai_responses" in reply.headers["x-metis-dropped"]
    sent = upstream(emulator, "/v1/messages", marker)
    assert "compaction" not in json.dumps(sent) and item["encrypted_content"] not in json.dumps(
        sent
    )
    assert [m["role"] for m in sent["messages"]] == ["user"]  # the two user turns, one message
