"""A server tool asked of a route, and Chat Completions' ``web_search_options``, through the
emulator: what no model of the route runs is left out and named in ``x-metis-dropped``, never
a 400 from each model refusing it in turn (issue 25: a setting the routed model cannot honour
is left out and reported); what one of its models runs goes as it came, and the router passes
over a model that refuses it. Chat's ``web_search_options`` is read as a web search, so a model
of another family searches, and a model that does not search is never sent it (OpenAI refuses
it: "Web search options not supported with this model") (docs/gateway.md, "Server tools")."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio

ROUTES = {"plain": {"models": ["gpt", "llama"]}, "later": {"models": ["llama", "sonnet"]}}
SEARCH_MODEL = {"openai:gpt-4o-search-preview": {"adapter": "openai", "aliases": ["searcher"]}}
SAID = [{"role": "user", "content": "Latest Python?"}]
ASKED = {  # each API's way of asking for a search or a code run
    "messages search": ("/v1/messages", {"max_tokens": 100, "messages": SAID, "tools": [
        {"type": "web_search_20250305", "name": "web_search"}]}),
    "messages code": ("/v1/messages", {"max_tokens": 100, "messages": SAID, "tools": [
        {"type": "code_execution_20250825", "name": "code_execution"}]}),
    "responses search": ("/v1/responses", {"input": "Latest Python?", "tools": [
        {"type": "web_search"}]}),
    "responses code": ("/v1/responses", {"input": "Latest Python?", "tools": [
        {"type": "code_interpreter", "container": {"type": "auto"}}]}),
    "chat search": ("/v1/chat/completions", {"messages": SAID, "web_search_options": {}}),
}  # fmt: skip


async def ask(emulator: Emulator, path: str, body: dict[str, Any]) -> httpx.Response:
    app = create_app(gateway_config(emulator, routes=ROUTES, models=SEARCH_MODEL))
    transport = httpx.ASGITransport(app=app)
    headers = {"x-api-key": GATEWAY_KEY, "authorization": f"Bearer {GATEWAY_KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        answer = await client.post(path, json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("asked", list(ASKED))
async def test_a_server_tool_no_model_of_the_route_runs_is_left_out_and_named(
    asked: str, stream: bool
) -> None:
    emulator = Emulator(models="any")
    path, body = ASKED[asked]
    answer = await ask(emulator, path, {**body, "model": "plain", "stream": stream})
    dropped = answer.headers["x-metis-dropped"]
    assert "no model of the route runs it" in dropped
    assert "groq:llama-3.3-70b-versatile: the model runs no" in dropped
    sent = emulator.bodies()[-1]
    assert "tools" not in sent and "web_search_options" not in sent


@pytest.mark.parametrize("asked", ["messages search", "responses search", "chat search"])
async def test_a_server_tool_a_later_model_of_the_route_runs_goes_to_it(asked: str) -> None:
    """The first model runs no search: the route's other model searches, as asked."""
    emulator = Emulator(model=["Python 3.14."], models="any")
    path, body = ASKED[asked]
    answer = await ask(emulator, path, {**body, "model": "later"})
    assert "x-metis-dropped" not in answer.headers
    assert emulator.requests[-1].provider == "anthropic"
    assert emulator.bodies()[-1]["tools"][0]["type"] == "web_search_20250305"


async def test_chats_web_search_options_to_a_model_that_does_not_search() -> None:
    """gpt-4o on Chat Completions does not search: the field is left out (translated) and
    named, not passed through to a 400."""
    emulator = Emulator(model=["Hi."], models="any")
    path, body = ASKED["chat search"]
    answer = await ask(emulator, path, {**body, "model": "gpt"})
    assert answer.headers["x-metis-path"] == "translated"
    assert (
        "web_search_options (on Chat Completions only the search models"
        in (answer.headers["x-metis-dropped"])
    )
    assert "web_search_options" not in emulator.bodies("openai")[-1]


async def test_chats_web_search_options_pass_through_to_a_search_model() -> None:
    emulator = Emulator(model=["Python 3.14."], models="any")
    path, body = ASKED["chat search"]
    located = {"type": "approximate", "approximate": {"country": "GB"}}
    given = {"search_context_size": "low", "user_location": located}
    answer = await ask(emulator, path, {**body, "model": "searcher", "web_search_options": given})
    assert answer.headers["x-metis-path"] == "pass-through"
    assert emulator.bodies("openai")[-1]["web_search_options"] == given


async def test_chats_web_search_options_make_claude_search() -> None:
    emulator = Emulator(model=["Python 3.14."], models="any")
    path, body = ASKED["chat search"]
    located = {"type": "approximate", "approximate": {"country": "GB", "city": "London"}}
    given = {"user_location": located}
    answer = await ask(emulator, path, {**body, "model": "sonnet", "web_search_options": given})
    assert "x-metis-dropped" not in answer.headers
    tool = emulator.bodies("anthropic")[-1]["tools"][0]
    assert tool["type"] == "web_search_20250305"
    assert tool["user_location"] == {"type": "approximate", "country": "GB", "city": "London"}


async def test_chats_web_search_options_must_be_an_object() -> None:
    app = create_app(gateway_config(Emulator(models="any")))
    transport = httpx.ASGITransport(app=app)
    body = {"model": "sonnet", "messages": SAID, "web_search_options": "yes"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        answer = await client.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {GATEWAY_KEY}"}
        )
    assert answer.status_code == 400 and "web_search_options" in answer.text


async def test_chats_web_search_options_pass_through_where_the_stack_maps_no_search() -> None:
    """An OpenAI-compatible stack (Groq's here) says nothing of web search: the field is its
    provider's to take or refuse, as before (OpenRouter takes it)."""
    emulator = Emulator(model=["Hi."], models="any")
    path, body = ASKED["chat search"]
    answer = await ask(emulator, path, {**body, "model": "llama"})
    assert answer.headers["x-metis-path"] == "pass-through"
    assert emulator.bodies("groq")[-1]["web_search_options"] == {}
