"""o1-mini takes no system prompt (the catalog says so: metis/catalog/knobs.py): a client of
another API routed to it through the gateway has its system text read at the start of the
first user message, named in ``x-metis-dropped``, and a Chat client's body, passed through as
written, is OpenAI's to judge."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

HEADERS = {"authorization": f"Bearer {GATEWAY_KEY}", "anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[httpx.Client, Emulator]]:
    emulator = Emulator()
    models = {"openai:o1-mini": {"adapter": "openai", "aliases": ["o1m"]}}
    app = create_app(gateway_config(emulator, models=models))
    with serving(app) as (url, _), httpx.Client(base_url=url, headers=HEADERS) as client:
        yield client, emulator


def test_a_messages_client_reaches_o1_mini_with_its_system_prompt_in_the_user_turn(
    served: tuple[httpx.Client, Emulator],
) -> None:
    client, emulator = served
    body = {
        "model": "o1m",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
    }
    reply = client.post("/v1/messages", json=body)
    assert reply.status_code == 200, reply.text
    assert "system prompt" in reply.headers["x-metis-dropped"]
    sent = json.loads(emulator.requests[-1].body)
    assert sent["model"] == "o1-mini"
    assert sent["messages"] == [{"role": "user", "content": "Be brief.\n\nHi"}]


def test_a_chat_client_of_o1_mini_is_served_as_it_wrote(
    served: tuple[httpx.Client, Emulator],
) -> None:
    client, emulator = served
    said = [{"role": "user", "content": "Hi"}]
    reply = client.post("/v1/chat/completions", json={"model": "o1m", "messages": said})
    assert reply.status_code == 200, reply.text
    assert json.loads(emulator.requests[-1].body)["messages"] == said
