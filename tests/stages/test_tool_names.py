"""Tool names a provider refuses (``0`` at Gemini, ``files.read`` at Anthropic) sent under
names it takes, and the reply's calls given back under the names the application gave, whole
and streamed, turn after turn as the conversation moves between providers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from metis import AdapterConfig, build_adapter
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.model.content import ToolResultBlock, ToolUseBlock
from metis.model.history import history_of
from metis.model.request import ToolChoice
from metis.stages.options import ToolNameRule
from metis.stages.policy.tool_names import NameRule, provider_names
from metis.testing.emulator import Emulator
from metis.testing.emulator.model import Prompt
from metis.testing.emulator.script import tools

DEFAULT = NameRule.of(ToolNameRule())
GEMINI = NameRule.of(ToolNameRule(chars="a-zA-Z0-9_.:-", first="a-zA-Z_"))
LONG = "mcp__" + "very_long_server_name_" * 4 + "__read"


def _request(*names: str, called: tuple[str, ...] = (), choice: str | None = None) -> Any:
    messages = [Message.user("go")]
    for n, name in enumerate(called):
        messages.append(Message.assistant(ToolUseBlock(id=f"tu_{n}", name=name, input={})))
        messages.append(Message.user(ToolResultBlock(tool_use_id=f"tu_{n}", content="ok")))
    return CanonicalRequest(
        model="m",
        messages=messages,
        max_output_tokens=10,
        tools=[ToolDefinition(name=name) for name in names],
        tool_choice=ToolChoice.tool(choice) if choice else None,
    )


def _names(request: CanonicalRequest, rule: NameRule) -> dict[str, str]:
    return provider_names(request, history_of(request.messages), rule)


def test_names_the_provider_takes_are_sent_as_given() -> None:
    assert _names(_request("get_weather", "a-b", "x" * 64), DEFAULT) == {}
    assert _names(_request("files.read", "ns:tool"), GEMINI) == {}


def test_a_refused_name_is_mended_the_same_way_on_every_call() -> None:
    request = _request("0", "files.read", "get weather", called=("9lives",), choice="0")
    assert _names(request, GEMINI) == {"0": "_0", "get weather": "get_weather", "9lives": "_9lives"}
    assert _names(request, DEFAULT) == {"files.read": "files_read", "get weather": "get_weather"}
    assert _names(request, DEFAULT) == _names(_request("files.read", "get weather"), DEFAULT)


def test_a_long_or_colliding_name_ends_in_a_hash_and_names_one_tool() -> None:
    sent = _names(_request(LONG, "a.b", "a_b"), DEFAULT)
    assert len(sent[LONG]) == 64 and DEFAULT.takes(sent[LONG])
    assert sent["a.b"].startswith("a_b_") and sent["a.b"] != "a_b"
    assert len(set(sent.values()) | {"a_b"}) == 3


@pytest.mark.parametrize(
    "rule", [{"chars": "a-z"}, {"chars": "z-a"}, {"first": "a-z"}, {"max_length": 4}]
)
def test_a_rule_a_mended_name_could_not_keep_is_refused(rule: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ToolNameRule(**rule)


def _first_tool(prompt: Prompt) -> Any:
    """Calls the first tool it was given, by the name it was given, until a result came."""
    if prompt.turns and any(turn.results for turn in prompt.turns):
        return "done"
    return tools((prompt.tools[0].name, {"path": "a"}))


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("stack", "name", "sent"),
    [("gemini", "0", "_0"), ("anthropic", "files.read", "files_read"), ("openai", "a b", "a_b")],
)
async def test_a_call_of_a_refused_name_comes_back_under_the_given_name(
    stream: bool, stack: str, name: str, sent: str
) -> None:
    emulator = Emulator(model=_first_tool)
    config = AdapterConfig(api_key="k", http_client=emulator.client(), max_retries=0)
    model = {"gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5", "openai": "gpt-4o"}
    request = _request(name, choice=name).model_copy(
        update={"model": f"{stack}:{model[stack]}", "stream": stream}
    )
    async with build_adapter(stack, config) as adapter:
        reply = await adapter.complete(request)
        (call,) = [b for b in reply.content if isinstance(b, ToolUseBlock)]
        assert call.name == name
        answered = request.model_copy(
            update={
                "messages": [
                    *request.messages,
                    reply.message,
                    Message.user(ToolResultBlock(tool_use_id=call.id, content="read")),
                ],
                "tool_choice": None,
            }
        )
        final = await adapter.complete(answered)
    assert final.text == "done"
    first, second = [_wire_names(r.json()) for r in emulator.requests]
    assert name not in first | second
    assert sent in first and sent in second  # declared, chosen, then called in the history


def _wire_names(value: Any) -> set[str]:
    """Every tool name a wire body holds (``name`` fields, Gemini's allowed names)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "name" and isinstance(item, str):
                found.add(item)
            elif key == "allowedFunctionNames":
                found.update(item)
            else:
                found |= _wire_names(item)
    elif isinstance(value, list):
        for item in value:
            found |= _wire_names(item)
    return found
