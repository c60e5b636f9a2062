"""Freeform tools (docs/contract.md §10), encode side: OpenAI's custom tools on Chat
Completions and Responses in the SDK's shapes (``ChatCompletionCustomToolParam``,
``ChatCompletionMessageCustomToolCallParam``, ``CustomToolParam``,
``ResponseCustomToolCallParam``, ``ResponseCustomToolCallOutputParam``), and a function of one
string elsewhere, a grammar nothing there enforces refused before sending."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import metis
from metis.errors import CapabilityError, ConfigError
from metis.model import (
    CanonicalRequest,
    FreeformInput,
    Message,
    ProviderRaw,
    TextDelta,
    ToolChoice,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.request import FREEFORM_SCHEMA
from metis.pipeline.call import Call
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import load_stack
from metis.stages.policy.capability_check import CapabilityCheck
from metis.testing.emulator import Emulator
from metis.wire import anthropic
from metis.wire.openai_chat import codec as chat
from metis.wire.openai_responses import OpenAIResponsesCodec
from metis.wire.rules import RULES

from .. import stack_table as platforms
from ..helpers import bound, make_call

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

PATCH = ToolDefinition(name="apply_patch", description="Apply a diff.", freeform=FreeformInput())
SQL = ToolDefinition(
    name="sql",
    freeform=FreeformInput(syntax="lark", definition='start: "SELECT " /[a-z]+/'),
)

DIFF = "*** Begin Patch\n*** Update File: a.py\n-x\n+y\n*** End Patch"


def _history(*tools: ToolDefinition, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model="x:m",
        messages=[
            Message.user("Fix a.py."),
            Message.assistant(ToolUseBlock(id="call_1", name="apply_patch", input={"input": DIFF})),
            Message.tool(ToolResultBlock(tool_use_id="call_1", content="Done.")),
        ],
        tools=list(tools),
        max_output_tokens=64,
        **fields,
    )


def test_a_freeform_tool_takes_text_and_its_call_input_is_one_string() -> None:
    assert PATCH.input_schema == FREEFORM_SCHEMA
    with pytest.raises(ValueError, match="both its syntax and its definition"):
        FreeformInput(syntax="regex")
    with pytest.raises(ValueError, match="give it no input_schema"):
        ToolDefinition(name="t", freeform=FreeformInput(), input_schema={"type": "object"})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_custom_tools_calls_and_tool_choice(stream: bool) -> None:
    request = _history(PATCH, SQL, tool_choice=ToolChoice.tool("sql"), stream=stream)
    body = chat.encode(request, make_call("openai", "openai:gpt-5"))
    assert body["tools"] == [
        {
            "type": "custom",
            "custom": {
                "name": "apply_patch",
                "description": "Apply a diff.",
                "format": {"type": "text"},
            },
        },
        {
            "type": "custom",
            "custom": {
                "name": "sql",
                "format": {
                    "type": "grammar",
                    "grammar": {"definition": 'start: "SELECT " /[a-z]+/', "syntax": "lark"},
                },
            },
        },
    ]
    assert body["tool_choice"] == {"type": "custom", "custom": {"name": "sql"}}
    assert body["messages"][1]["tool_calls"] == [
        {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": DIFF}}
    ]
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "Done."}
    assert RULES["openai_chat"](body) == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_custom_tools_calls_and_outputs(stream: bool) -> None:
    request = _history(PATCH, SQL, tool_choice=ToolChoice.tool("apply_patch"), stream=stream)
    body = OpenAIResponsesCodec().encode(request, make_call("openai_responses", "x:gpt-5"))
    assert body["tools"] == [
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Apply a diff.",
            "format": {"type": "text"},
        },
        {
            "type": "custom",
            "name": "sql",
            "format": {
                "type": "grammar",
                "syntax": "lark",
                "definition": 'start: "SELECT " /[a-z]+/',
            },
        },
    ]
    assert body["tool_choice"] == {"type": "custom", "name": "apply_patch"}
    assert body["input"][1:] == [
        {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": DIFF},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done."},
    ]
    assert RULES["openai_responses"](body) == []


def test_a_call_openai_made_as_custom_goes_back_as_custom_without_the_declaration() -> None:
    made = ProviderRaw(
        provider="openai_responses",
        model="x:gpt-5",
        data={"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1"},
    )
    request = CanonicalRequest(
        model="x:gpt-5",
        messages=[
            Message.user("Fix a.py."),
            Message.assistant(
                ToolUseBlock(
                    id="call_1", name="apply_patch", input={"input": DIFF}, provider_raw=made
                )
            ),
            Message.tool(ToolResultBlock(tool_use_id="call_1", content="Done.")),
        ],
        max_output_tokens=64,
    )
    body = OpenAIResponsesCodec().encode(request, make_call("openai_responses", "x:gpt-5"))
    assert body["input"][1] == {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_1",
        "name": "apply_patch",
        "input": DIFF,
    }
    assert body["input"][2]["type"] == "custom_tool_call_output"


async def _checked(request: CanonicalRequest, stack: str) -> CanonicalRequest:
    seen: list[CanonicalRequest] = []

    async def inner(req: CanonicalRequest, call: Call) -> Any:
        seen.append(req)
        yield TextDelta(0, "ok")

    stage = bound(CapabilityCheck(), capabilities=load_stack(stack).capabilities)
    _ = [e async for e in stage(request, make_call(stack, f"{stack}:m"), inner)]
    return seen[0]


@pytest.mark.anyio
async def test_without_custom_tools_a_freeform_tool_is_a_function_of_one_string() -> None:
    sent = await _checked(_history(PATCH), "anthropic")
    (tool,) = sent.tools
    assert tool.freeform is None and tool.input_schema == FREEFORM_SCHEMA
    body = anthropic.encode(sent, make_call())
    assert body["tools"][0]["input_schema"] == FREEFORM_SCHEMA
    assert body["messages"][1]["content"][0]["input"] == {"input": DIFF}  # the same call
    assert (await _checked(_history(PATCH), "openai")).tools[0].freeform is not None


@pytest.mark.anyio
async def test_a_grammar_nothing_would_enforce_is_refused_before_sending() -> None:
    with pytest.raises(CapabilityError, match="tool 'sql' takes text held to a lark grammar"):
        await _checked(_history(SQL), "anthropic")
    with pytest.raises(CapabilityError, match="custom tools"):
        await _checked(_history(SQL), "azure_responses")


def test_a_custom_call_input_must_be_text() -> None:
    body = {
        "model": "gpt-5",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "p", "input": 3}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
        ],
    }
    assert RULES["openai_chat"](body) == [
        "messages[1].tool_calls[0].custom.input: must be a string"
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["openai", "openai_responses", "anthropic", "gemini", "bedrock"])
async def test_a_history_with_a_freeform_call_is_accepted_on_the_emulator(
    stack: str, emulator: Emulator
) -> None:
    adapter = platforms.adapter(stack, emulator, InMemoryToolIdStore())
    request = _history(PATCH).model_copy(update={"model": platforms.MODELS[stack]})
    with anyio.fail_after(20):
        reply = await adapter.complete(request)
    assert reply.text


def test_metis_tool_makes_a_freeform_tool_of_a_function_of_one_text() -> None:
    @metis.tool(freeform=FreeformInput())
    def apply_patch(input: str) -> str:
        """Apply a diff."""
        return f"applied {len(input.splitlines())} lines"

    assert apply_patch.definition.freeform == FreeformInput()
    assert apply_patch.definition.input_schema == FREEFORM_SCHEMA
    call = ToolUseBlock(id="tu_1", name="apply_patch", input={"input": DIFF})
    (result,) = metis.run_tools(Message.assistant(call), [apply_patch]).content
    assert isinstance(result, ToolResultBlock) and result.content == "applied 5 lines"
    with pytest.raises(ConfigError, match="takes one parameter, input: str"):

        @metis.tool(freeform=FreeformInput())
        def two(input: str, mode: str) -> str:
            return input + mode
