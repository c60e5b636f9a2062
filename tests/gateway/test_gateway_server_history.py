"""Server-tool blocks the gateway wrote for another provider (metis/gateway/server_written.py)
sent back in a later turn: marked as the gateway's (docs/gateway.md, "Server tools"), they go
to a Claude model as it can read them, never as Anthropic's own blocks it would refuse."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.server_written import SEALED, written_in
from metis.testing.emulator import Emulator, code_execution, web_search
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio

FOUND = [("https://www.python.org/downloads/", "Download Python")]
SEARCHED = web_search("latest python", FOUND, say="Python 3.14 is out.")
RAN = code_execution("print(6 * 7)", stdout="42\n", say="It is 42.")
SEARCH = {"type": "web_search_20250305", "name": "web_search"}
CODE = {"type": "code_execution_20250825", "name": "code_execution"}


async def post(emulator: Emulator, body: dict[str, Any]) -> httpx.Response:
    app = create_app(gateway_config(emulator))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        return await client.post("/v1/messages", json=body, headers={"x-api-key": GATEWAY_KEY})


def turn(model: str, said: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": model, "max_tokens": 300, "tools": tools, "messages": said}


WRITTEN = [(SEARCH, SEARCHED, "Python 3.14 is out."), (CODE, RAN, "stdout:\n42")]


@pytest.mark.parametrize(("tool", "reply", "kept"), WRITTEN, ids=["search", "code"])
async def test_another_providers_server_blocks_go_on_to_claude_as_text(
    tool: dict[str, Any], reply: Any, kept: str
) -> None:
    """Gemini's search (cited) or code run, written as Anthropic's blocks and sent back to a
    Claude model: the results go as text, the citations are left out (Anthropic refuses an
    ``encrypted_index`` it did not issue)."""
    emulator = Emulator(model=[reply, "Noted."], models="any")
    said = [{"role": "user", "content": "Latest Python? Work it out."}]
    first = await post(emulator, turn("flash", said, [tool]))
    assert first.status_code == 200, first.text
    content = first.json()["content"]
    said += [{"role": "assistant", "content": content}, {"role": "user", "content": "Thanks."}]
    second = await post(emulator, turn("sonnet", said, [tool]))
    assert second.status_code == 200, second.text
    assert second.json()["content"][0]["text"] == "Noted."
    sent = emulator.bodies("anthropic")[-1]["messages"][1]["content"]
    assert {block["type"] for block in sent} == {"text"}
    assert not any(block.get("citations") for block in sent)
    assert kept in "".join(block["text"] for block in sent)


def test_only_what_the_gateway_wrote_is_kept_from_passing_through() -> None:
    own = {"type": "server_tool_use", "id": "srvtoolu_01A", "name": "web_search", "input": {}}
    cited = {"type": "web_search_result_location", "url": "u", "encrypted_index": "Zm9v"}
    said = {
        "role": "assistant",
        "content": [own, {"type": "text", "text": "t", "citations": [cited]}],
    }
    assert not written_in({"messages": [said]})
    for marked in ({**own, "id": "srvtoolu_metis_1"}, {**cited, "encrypted_index": SEALED}):
        block = (
            marked
            if marked["type"] == "server_tool_use"
            else {"type": "text", "citations": [marked]}
        )
        assert written_in({"messages": [{"role": "assistant", "content": [block]}]})
