"""Responses items the gateway wrote for another provider (metis/gateway/server_written.py)
sent back in a later turn by a Responses client: marked as the gateway's (docs/gateway.md,
"Server tools"), they go to an OpenAI Responses model as it can read them, never passed
through as OpenAI's own items, whose ids it would not find. And OpenAI's own items, sent back
to another model (as text) or in a conversation the gateway continues for an upstream (with
their ids only where it stored them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.server_written import RESPONSES_MARKS, responses_written_in
from metis.testing.emulator import Emulator, code_execution, thinking, web_search
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
FOUND = [("https://www.python.org/downloads/", "Download Python")]
SEARCHED = web_search("latest python", FOUND, say="Python 3.14 is out.")
RAN = code_execution("print(6 * 7)", stdout="42\n", say="It is 42.")
SEARCH = {"type": "web_search"}
CODE = {"type": "code_interpreter", "container": {"type": "auto"}}
WRITTEN = [  # Claude's search, Gemini's code run
    ("sonnet", SEARCH, SEARCHED, "web_search_call", "python.org"),
    ("flash", CODE, RAN, "code_interpreter_call", "print(6 * 7)"),
]


@contextmanager
def _sdk(emulator: Emulator) -> Iterator[Any]:
    with serving(create_app(gateway_config(emulator))) as (url, _):
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)


def _said(output: list[Any]) -> list[dict[str, Any]]:
    items = [item.model_dump(exclude_none=True) for item in output]
    return [{"role": "user", "content": "Latest Python? Work it out."}, *items]


@pytest.mark.parametrize(
    ("model", "tool", "reply", "kind", "kept"), WRITTEN, ids=["search", "code"]
)
@pytest.mark.parametrize("store", [True, False], ids=["stored", "stateless"])
def test_another_providers_server_items_go_on_to_openai_as_it_reads_them(
    model: str, tool: dict[str, Any], reply: Any, kind: str, kept: str, store: bool
) -> None:
    """Claude's search or Gemini's code run, written as a Responses item and sent back in ``input``
    to gpt-5: the gateway's item goes translated, its result as text, not passed through
    with an id OpenAI never made (the emulator refuses such an id, as OpenAI does)."""
    emulator = Emulator(model=[reply, "Noted."], models="any")
    with _sdk(emulator) as sdk:
        first = sdk.responses.create(
            model=model, input="Latest Python? Work it out.", tools=[tool], store=store
        )
        written = [item for item in first.output if item.type == kind]
        assert written and written[0].id.startswith(RESPONSES_MARKS[kind])
        said = [*_said(first.output), {"role": "user", "content": "Thanks."}]
        raw = sdk.responses.with_raw_response.create(
            model="gpt5", input=said, tools=[tool], store=store
        )
    assert raw.headers["x-metis-path"] == "translated"
    assert raw.parse().output_text == "Noted."
    sent = emulator.bodies("openai_responses")[-1]["input"]
    assert not any(str(item.get("id", "")).startswith(("ws_", "ci_")) for item in sent)
    assert kept in str(sent)


@pytest.mark.parametrize(
    ("model", "tool", "reply", "kind", "kept"), WRITTEN, ids=["search", "code"]
)
def test_a_previous_response_of_another_provider_gives_openai_its_server_results_as_text(
    model: str, tool: dict[str, Any], reply: Any, kind: str, kept: str
) -> None:
    """gpt-5 continuing by ``previous_response_id`` a response another provider made with a
    server tool: the conversation passes through as items OpenAI can take, the tool's result
    as text, no item under the gateway's id."""
    emulator = Emulator(model=[reply, "Noted."], models="any")
    with _sdk(emulator) as sdk:
        first = sdk.responses.create(model=model, input="Latest Python?", tools=[tool])
        raw = sdk.responses.with_raw_response.create(
            model="gpt5", input="Thanks.", previous_response_id=first.id, tools=[tool]
        )
    assert raw.headers["x-metis-path"] == "pass-through"
    assert raw.parse().output_text == "Noted."
    sent = emulator.bodies("openai_responses")[-1]["input"]
    assert not any(item.get("type") == kind for item in sent)
    assert kept in str([item["content"] for item in sent if item.get("role") == "assistant"])


def test_another_models_reasoning_item_goes_to_openai_translated() -> None:
    """Claude's thinking written as a reasoning item (its encrypted content names its maker)
    and sent back to gpt-5 without the server's store: never passed through, so OpenAI is
    sent no encrypted content it did not issue (the emulator refuses such, as OpenAI does)."""
    emulator = Emulator(model=[thinking("Mull it over.", "Python 3.14."), "Noted."], models="any")
    asked: dict[str, Any] = {"store": False, "include": ["reasoning.encrypted_content"]}
    with _sdk(emulator) as sdk:
        first = sdk.responses.create(
            model="sonnet", input="Latest Python?", reasoning={"effort": "low"}, **asked
        )
        assert first.output[0].type == "reasoning" and first.output[0].encrypted_content
        said = [*_said(first.output), {"role": "user", "content": "Thanks."}]
        raw = sdk.responses.with_raw_response.create(model="gpt5", input=said, **asked)
    assert raw.headers["x-metis-path"] == "translated"
    assert raw.parse().output_text == "Noted."
    sent = emulator.bodies("openai_responses")[-1]["input"]
    assert not any(item.get("type") == "reasoning" for item in sent)


def test_an_item_id_openai_never_made_is_refused_by_the_emulator() -> None:
    """The emulator refuses a hosted tool's item whose id it did not make, as OpenAI does:
    what makes the test above able to fail. An item not marked as the gateway's passes
    through as the client wrote it, and the refusal reaches the client."""
    foreign = {"type": "web_search_call", "id": "ws_notmade", "status": "completed"}
    foreign["action"] = {"type": "search", "query": "python"}
    said = [{"role": "user", "content": "Hi."}, foreign, {"role": "user", "content": "Thanks."}]
    refused = pytest.raises(openai.BadRequestError, match="ws_notmade' not found")
    with _sdk(Emulator(model=["Noted."], models="any")) as sdk, refused:
        sdk.responses.create(model="gpt5", input=said, store=False)


def test_only_the_items_the_gateway_wrote_are_kept_from_passing_through() -> None:
    own = {"type": "web_search_call", "id": "ws_0123", "status": "completed", "action": {}}
    assert not responses_written_in({"input": [own, {"role": "user", "content": "t"}]})
    for kind, mark in RESPONSES_MARKS.items():
        item = {**own, "type": kind, "id": mark + "1"}
        assert responses_written_in({"input": ["text", item]})
    assert not responses_written_in({"input": "ws_metis_1"})


OPENAI_SEARCH = {  # as gpt-5 wrote it, sources included
    "type": "web_search_call",
    "id": "ws_0a1b2c3d",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "latest python",
        "sources": [{"type": "url", "url": "https://www.python.org/downloads/"}],
    },
}


@pytest.mark.parametrize("model", ["sonnet", "flash"])
def test_openais_own_search_item_reaches_another_model_as_text_and_is_named(model: str) -> None:
    """A ``web_search_call`` OpenAI made, in the history a client sends to Claude or Gemini:
    no other provider can replay the item, so it is named in ``x-metis-dropped``, and what
    the search found goes on as text, so the model still knows it."""
    said = [
        {"role": "user", "content": "Latest Python?"},
        OPENAI_SEARCH,
        {"role": "assistant", "content": "Python 3.14."},
        {"role": "user", "content": "Where did you read that?"},
    ]
    emulator = Emulator(model=["On python.org."], models="any")
    with _sdk(emulator) as sdk:
        raw = sdk.responses.with_raw_response.create(model=model, input=said)
    assert raw.headers["x-metis-path"] == "translated"
    assert "input[1] (web_search_call)" in raw.headers["x-metis-dropped"]
    sent = json.dumps(emulator.bodies()[-1])
    assert "https://www.python.org/downloads/" in sent and "latest python" in sent
    assert "ws_0a1b2c3d" not in sent


def test_openais_own_code_item_without_its_outputs_is_named() -> None:
    """A ``code_interpreter_call`` with no outputs (not asked for with ``include``): its code
    goes on as text where the result can say it; the item is named either way."""
    ran = {"type": "code_interpreter_call", "id": "ci_0a1b", "status": "completed"}
    ran.update(code="print(6 * 7)", container_id="cntr_1", outputs=[{"type": "logs", "logs": "42"}])
    said = [{"role": "user", "content": "6 * 7?"}, ran, {"role": "user", "content": "Sure?"}]
    emulator = Emulator(model=["Yes."], models="any")
    with _sdk(emulator) as sdk:
        raw = sdk.responses.with_raw_response.create(model="sonnet", input=said)
    assert "input[1] (code_interpreter_call)" in raw.headers["x-metis-dropped"]
    sent = json.dumps(emulator.bodies("anthropic")[-1])
    assert "print(6 * 7)" in sent and "42" in sent and "ci_0a1b" not in sent


# OpenAI's own server items in a passed-through conversation continued by previous_response_id,
# when the gateway sends the conversation in the id's place (docs/gateway.md "Pass-through"):
# with the id its upstream made where that upstream stored them, as text elsewhere (an upstream
# that did not store one looks its id up in vain, and refuses it without one, as OpenAI does).
STACKS = {  # a deployment that keeps nothing with OpenAI; one that keeps it but not the id
    "unkept": "codec_settings: {store: false, include_encrypted_reasoning: auto}\n",
    "kept": "stages: {remove: [continuation]}\n",
}


def _config(tmp_path: Path, emulator: Emulator, stack: str) -> GatewayConfig:
    path = tmp_path / f"{stack}.yaml"
    path.write_text(f"name: {stack}\nextends: openai_responses\n{STACKS[stack]}")
    adapter = {"type": str(path), "api_key_env": "UPSTREAM_KEY", "max_retries": 0}
    data = {
        "adapters": {"upstream": adapter},
        "models": {"gpt-5": {"adapter": "upstream", "aliases": ["gpt5"]}},
        "gateway": {"api_key_env": "GATEWAY_KEY"},
    }
    environ = {"UPSTREAM_KEY": "sk-upstream", "GATEWAY_KEY": GATEWAY_KEY}
    return GatewayConfig.from_dict(data, environ=environ, clients={"upstream": emulator.client()})


@pytest.mark.parametrize("stack", list(STACKS))
def test_a_search_item_goes_on_with_its_id_only_where_it_is_stored(
    tmp_path: Path, stack: str
) -> None:
    emulator = Emulator(
        model=[web_search("latest python", FOUND, say="Python 3.14."), "On python.org."]
    )
    with serving(create_app(_config(tmp_path, emulator, stack))) as (url, _):
        sdk = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)
        first = sdk.responses.create(model="gpt5", input="Latest Python?", tools=[SEARCH])
        searched = next(item for item in first.output if item.type == "web_search_call")
        raw = sdk.responses.with_raw_response.create(
            model="gpt5", previous_response_id=first.id, input="Where?", tools=[SEARCH]
        )
    assert raw.headers["x-metis-path"] == "pass-through"
    assert raw.parse().output_text == "On python.org."
    sent: list[dict[str, Any]] = emulator.bodies("openai_responses")[-1]["input"]
    assert "previous_response_id" not in emulator.bodies("openai_responses")[-1]
    items = [item for item in sent if item.get("type") == "web_search_call"]
    if stack == "kept":  # OpenAI holds the item: it goes back whole, under OpenAI's own id
        assert [item["id"] for item in items] == [searched.id]
        assert "x-metis-dropped" not in raw.headers
    else:  # OpenAI kept nothing: what the search found goes as text, and is said
        assert not items and "python.org/downloads" in str(sent)
        assert "web_search_call" in raw.headers["x-metis-dropped"]
