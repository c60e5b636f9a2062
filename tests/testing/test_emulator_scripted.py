"""The emulator's scripted mode (a script of replies, or a function of the prompt) and its
in-process transport (no socket): each format still checks the request by its provider's rules
and renders the reply as its provider would."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ConfigError
from metis.model import CanonicalRequest, Message, ThinkingConfig, ToolDefinition, ToolResultBlock
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, Prompt, Reply, Script, thinking, tools

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def ask(model: str, *messages: Message, **fields: Any) -> CanonicalRequest:
    history = list(messages) or [Message.user("What's the weather in Paris?")]
    return CanonicalRequest(
        model=model, session_id="s", messages=history, max_output_tokens=2048, **fields
    )


def messages_body(content: str = "hi", model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    return {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": content}]}


@pytest.mark.anyio
async def test_one_script_answers_every_format_in_turn_through_metis() -> None:
    script = [tools(("get_weather", {"city": "Oslo"})), "Cold in Oslo.", "Hello from OpenAI."]
    emulator = Emulator(model=script, models="any")
    config = AdapterConfig(api_key="k", http_client=emulator.client())
    store = InMemoryToolIdStore()
    anthropic = build_adapter("anthropic", config, tool_id_store=store)
    openai = build_adapter("openai", config, tool_id_store=store)
    first = await anthropic.complete(ask("anthropic:claude-x", tools=[WEATHER]))
    call = first.tool_calls[0]
    assert (call.name, call.input) == ("get_weather", {"city": "Oslo"})
    answer = Message.tool(ToolResultBlock(tool_use_id=call.id, content="-3C"))
    history = [Message.user("Weather?"), Message.assistant(*first.content), answer]
    second = await anthropic.complete(ask("anthropic:claude-x", *history, tools=[WEATHER]))
    assert second.text == "Cold in Oslo."
    third = await openai.complete(ask("openai:gpt-x", Message.user("hi")))
    assert third.text == "Hello from OpenAI."
    assert not emulator.running  # no socket was ever opened
    assert [len(emulator.bodies(p)) for p in ("anthropic", "openai")] == [2, 1]
    assert emulator.call_ids("anthropic") == [
        emulator.bodies("anthropic")[1]["messages"][1]["content"][0]["id"]
    ]


@pytest.mark.anyio
async def test_a_function_model_sees_the_prompt_without_system_reminders() -> None:
    seen: list[Prompt] = []

    def model(prompt: Prompt) -> str:
        seen.append(prompt)
        return f"{prompt.provider}: {prompt.user_text}"

    emulator = Emulator(model=model)
    said = "<system-reminder>Use the Todo Tool. Remember CLAUDE.md.</system-reminder>\nHow are you?"
    async with httpx.AsyncClient(
        transport=emulator.transport(), base_url="http://emulator"
    ) as http:
        reply = await http.post("/v1/messages", json=messages_body(said), headers=ANTHROPIC)
    assert reply.json()["content"][0]["text"] == "anthropic: How are you?"
    assert seen[0].turns[0].text == said


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("Hello", "model='Hello': expected a list of replies"),  # not a script of its letters
        (5, "model=5: expected a list of replies"),
        (["Hello", 5], "model[1] is int 5; expected a reply"),
    ],
)
def test_a_model_that_is_no_script_is_a_config_error_saying_what_one_is(
    model: Any, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Emulator(model=model)
    assert said in str(caught.value)


def test_a_tool_call_written_without_its_arguments_says_the_form() -> None:
    with pytest.raises(ConfigError, match=r"call 0 is \('get_weather', 'Oslo'\); expected"):
        tools(("get_weather", "Oslo"))  # type: ignore[arg-type]


def test_a_script_that_has_run_out_is_the_providers_400_saying_so() -> None:
    emulator = Emulator(model=Script(["only one"]))
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        assert http.post("/v1/messages", json=messages_body(), headers=ANTHROPIC).status_code == 200
        refused = http.post("/v1/messages", json=messages_body(), headers=ANTHROPIC)
        chat = http.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": "Bearer k"},
        )
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "type": "invalid_request_error",
        "message": "the script has no more replies",
    }
    assert chat.json()["error"]["message"] == "the script has no more replies"


def test_a_scripted_request_is_still_checked_by_the_providers_rules() -> None:
    script = Script(["never sent"])
    emulator = Emulator(model=script)
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        bad = {**messages_body(), "max_tokens": 0}
        refused = http.post("/v1/messages", json=bad, headers=ANTHROPIC)
    assert refused.status_code == 400 and "max_tokens" in refused.json()["error"]["message"]
    assert script.remaining == 1


@pytest.mark.anyio
async def test_scripted_thinking_is_signed_by_the_emulator_and_accepted_back() -> None:
    emulator = Emulator(
        model=[thinking("Look it up.", tools(("get_weather", {"city": "Rome"}))), "Warm."],
        models="any",
    )
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k", http_client=emulator.client()))
    request = ask(
        "anthropic:claude-x", tools=[WEATHER], thinking=ThinkingConfig(budget_tokens=1024)
    )
    first = await adapter.complete(request)
    thought = first.content[0]
    assert thought.type == "thinking" and thought.thinking == "Look it up."  # type: ignore[union-attr]
    answer = Message.tool(ToolResultBlock(tool_use_id=first.tool_calls[0].id, content="25C"))
    history = [*request.messages, Message.assistant(*first.content), answer]
    second = await adapter.complete(request.model_copy(update={"messages": history}))
    assert second.text == "Warm."
    sent = emulator.bodies("anthropic")[1]["messages"][1]["content"][0]
    assert sent["signature"] == thought.signature  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_the_in_process_transport_streams_and_injects_faults() -> None:
    emulator = Emulator(model=lambda prompt: "one two three four five six")
    body = {**messages_body(), "stream": True}
    async with httpx.AsyncClient(
        transport=emulator.transport(), base_url="http://emulator"
    ) as http:
        async with http.stream("POST", "/v1/messages", json=body, headers=ANTHROPIC) as response:
            chunks = [chunk async for chunk in response.aiter_bytes()]
        assert response.headers["content-type"].startswith("text/event-stream")
        assert len(chunks) > 5 and b"message_stop" in chunks[-1]
        emulator.push_fault("drop=3")
        with pytest.raises(httpx.RemoteProtocolError):
            async with http.stream("POST", "/v1/messages", json=body, headers=ANTHROPIC) as cut:
                [chunk async for chunk in cut.aiter_bytes()]
        emulator.push_fault("drop")
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post("/v1/messages", json=messages_body(), headers=ANTHROPIC)
        limited = await http.post(
            "/v1/messages",
            json=messages_body(),
            headers={**ANTHROPIC, "x-emulator-fault": "rate_limit=2"},
        )
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert emulator.stats.faults == {"drop": 2, "rate_limit": 1}


def test_tools_offered_in_the_system_prompt_are_called_with_tags_whoever_answers() -> None:
    emulator = Emulator(model=[tools(("get_weather", {"city": "Lima"}))], models="any")
    system = '<tools>\n{"name": "get_weather", "parameters": {"type": "object"}}\n</tools>'
    body = {
        "model": "tgi",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Lima?"}],
    }
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        reply = http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    message = reply.json()["choices"][0]["message"]
    call = json.loads(message["content"].removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert (
        call == {"name": "get_weather", "arguments": {"city": "Lima"}}
        and "tool_calls" not in message
    )


def test_what_a_model_says_before_its_tagged_calls_is_kept() -> None:
    reply = tools(("get_weather", {"city": "Lima"}), say="Checking.")
    emulator = Emulator(model=[reply], models="any")
    system = '<tools>\n{"name": "get_weather", "parameters": {"type": "object"}}\n</tools>'
    body = {
        "model": "tgi",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Lima?"}],
    }
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        answer = http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    said = answer.json()["choices"][0]["message"]["content"]
    call = '{"name": "get_weather", "arguments": {"city": "Lima"}}'
    assert said == f"Checking.<tool_call>{call}</tool_call>"


def test_the_callers_own_system_prompt_is_read_beside_tools_offered_in_it() -> None:
    """metis's tool_shim adds its ``# Tools`` section after the caller's system prompt: the
    model reads the tools from it and the caller's words as the system prompt (they were
    read as nothing)."""
    script = Script(["Cold."])
    tools_section = '# Tools\n\n<tools>\n{"name": "get_weather", "parameters": {}}\n</tools>'
    body = {
        "model": "tgi",
        "messages": [
            {"role": "system", "content": "Be brief.\n\n" + tools_section},
            {"role": "user", "content": "Lima?"},
        ],
    }
    emulator = Emulator(model=script, models="any")
    with httpx.Client(transport=emulator.transport(), base_url="http://e") as http:
        http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    (prompt,) = script.prompts
    assert prompt.system == "Be brief." and [t.name for t in prompt.tools] == ["get_weather"]


def test_a_gemini_function_response_holding_an_error_is_read_as_a_failed_call() -> None:
    script = Script(["Sorry.", "Sunny."])
    emulator = Emulator(model=script, models="any")
    call = {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}}
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    with httpx.Client(transport=emulator.transport(), base_url="http://e") as http:
        for response in ({"error": "no such city"}, {"output": "sunny"}):
            answer = {"functionResponse": {"id": "c1", "name": "get_weather", "response": response}}
            contents = [
                {"role": "user", "parts": [{"text": "Lima?"}]},
                {"role": "model", "parts": [call]},
                {"role": "user", "parts": [answer]},
            ]
            http.post(path, json={"contents": contents}, headers={"x-goog-api-key": "k"})
    failed, answered = (prompt.turns[-1].results[0] for prompt in script.prompts)
    assert (failed.content, failed.is_error) == ("no such city", True)
    assert (answered.content, answered.is_error) == ("sunny", False)


def test_a_nova_code_run_sent_back_is_not_read_as_the_models_own_call() -> None:
    """Bedrock Converse: a system tool's ``toolUse`` (``type: server_tool_use``) and its
    ``toolResult`` in the history are the service's, not calls the model made."""
    script = Script(["Done."])
    emulator = Emulator(model=script, models="any")
    use = {"toolUseId": "t1", "name": "nova_code_interpreter", "input": {"code": "1"}}
    result = {"toolUseId": "t1", "type": "nova_code_interpreter_result", "status": "success"}
    ran = [{"toolUse": {**use, "type": "server_tool_use"}}, {"toolResult": {**result}}]
    ran[1]["toolResult"]["content"] = [{"text": "1"}]
    messages = [
        {"role": "user", "content": [{"text": "Run it."}]},
        {"role": "assistant", "content": [*ran, {"text": "It printed 1."}]},
        {"role": "user", "content": [{"text": "Thanks."}]},
    ]
    path = "/model/us.amazon.nova-2-lite-v1:0/converse"
    with httpx.Client(transport=emulator.transport(), base_url="http://e") as http:
        tools = {"tools": [{"systemTool": {"name": "nova_code_interpreter"}}]}
        sent = {"messages": messages, "toolConfig": tools}
        answer = http.post(path, json=sent, headers={"authorization": "Bearer k"})
    assert answer.status_code == 200, answer.text
    (prompt,) = script.prompts
    assert [(t.calls, t.results) for t in prompt.turns] == [([], [])] * 3
    assert prompt.turns[1].text == "It printed 1."


def test_a_reply_the_model_cannot_give_is_refused_not_crashed() -> None:
    emulator = Emulator(model=lambda prompt: 42)
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        refused = http.post("/v1/messages", json=messages_body(), headers=ANTHROPIC)
    assert (
        refused.status_code == 400
        and "expected a Reply or a string" in refused.json()["error"]["message"]
    )


def test_replies_are_copied_so_a_script_can_reuse_one() -> None:
    same = Reply(text="again and again")
    emulator = Emulator(model=[same, same])
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        usages = [
            http.post("/v1/messages", json=messages_body(), headers=ANTHROPIC).json()["usage"]
            for _ in "ab"
        ]
    assert usages[0] == usages[1] and same.usage.output_tokens == 0


def test_a_misspelt_provider_or_a_malformed_search_result_is_said_not_read_as_nothing() -> None:
    """``bodies("antropic")`` was an empty list, as if nothing had been sent; a search result
    given as a bare URL failed only when a reply was rendered."""
    from metis.testing.emulator import web_search

    emulator = Emulator()
    with pytest.raises(ValueError, match="unknown provider 'antropic'"):
        emulator.bodies("antropic")
    with pytest.raises(ValueError, match="unknown provider 'antropic'"):
        emulator.call_ids("antropic")
    assert emulator.bodies("claude") == [] and emulator.bodies() == []  # an alias, and all
    with pytest.raises(ConfigError, match=r"result 0 is 'https://a.example'; expected \(url"):
        web_search("q", ["https://a.example"])  # type: ignore[list-item]


def test_a_reply_with_an_unknown_stop_is_refused_when_scripted() -> None:
    """Before: ``Reply(stop="nope")`` was taken, and failed (or rendered an unknown stop
    reason) only when a format answered with it."""
    with pytest.raises(ValueError, match="'nope' is not one of end_turn, tool_use, max_tokens"):
        Reply(text="hi", stop="nope")  # type: ignore[arg-type]
    assert Reply(stop="refusal").stop == "refusal"
