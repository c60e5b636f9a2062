"""Conversations that move between stacks, turn by turn (tests/conformance/test_conversations.py).

Each stack is the emulator in its scripted mode, answering from one script and refusing, with
the real API's 400, any request that API would refuse: so every turn proves the stack accepts
the history the others made.
"""

from __future__ import annotations

from collections.abc import Iterable

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    CanonicalResponse,
    Message,
    Role,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, Reply, text, tools

from .helpers import answer
from .stack_table import WEATHER

TOOLS = [
    WEATHER,
    ToolDefinition(
        name="to_fahrenheit",
        description="Convert Celsius to Fahrenheit",
        input_schema={
            "type": "object",
            "properties": {"celsius": {"type": "number"}},
            "required": ["celsius"],
        },
    ),
]
USER_TURNS = ["What's the weather in Paris?", "And Berlin and Rome?", "Thanks! One line, please."]


def script() -> list[Reply]:
    """Six replies: a call, an answer, two calls at once, a call on their results, two answers."""
    return [
        tools(("get_weather", {"city": "Paris"})),
        text("Sunny and 21 °C in Paris."),
        tools(
            ("get_weather", {"city": "Berlin"}),
            ("get_weather", {"city": "Rome"}),
            say="Checking both.",
        ),
        tools(("to_fahrenheit", {"celsius": 21})),
        text("Berlin is cloudy, Rome is hot, and 21 °C is 69.8 °F."),
        text("Paris sunny, Berlin cloudy, Rome hot."),
    ]


def run_tool(call: ToolUseBlock) -> ToolResultBlock:
    if call.name == "get_weather":
        return ToolResultBlock(tool_use_id=call.id, content=f"{call.input['city']}: sunny, 21C")
    return ToolResultBlock(tool_use_id=call.id, content=str(call.input["celsius"] * 9 / 5 + 32))


def scripted(replies: list[Reply]) -> Emulator:
    return Emulator(model=replies, models="any")


def adapters_for(emulator: Emulator, *stacks: str) -> dict[str, Adapter]:
    """An adapter per stack on one in-process emulator, sharing one tool-id store."""
    store = InMemoryToolIdStore()
    config = AdapterConfig(api_key="test-key", http_client=emulator.client())
    return {stack: build_adapter(stack, config, tool_id_store=store) for stack in stacks}


async def fold_stream(adapter: Adapter, request: CanonicalRequest) -> CanonicalResponse:
    response: CanonicalResponse = await answer(adapter, request, streaming=True)
    return response


async def converse(
    order: Iterable[Adapter],
    streaming: bool,
    *,
    turns: Iterable[str] = USER_TURNS,
    session_id: str = "conformance",
    max_output_tokens: int = 512,
    with_thinking: bool = False,
) -> list[Message]:
    """Each adapter in ``order`` takes one turn: the user's next message after an answer, the
    tools' results after calls. With ``with_thinking``, each model that can think is asked to."""
    users = iter(turns)
    history = [Message.user(next(users))]
    for adapter in order:
        think = with_thinking and adapter.capabilities.supports_thinking
        request = CanonicalRequest(
            model=f"{adapter.name}:test-model",
            session_id=session_id,
            system_prompt="Be brief.",
            messages=history,
            tools=TOOLS,
            max_output_tokens=max_output_tokens,
            thinking=ThinkingConfig(budget_tokens=1024) if think else None,
        )
        response = await answer(adapter, request, streaming)
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        if response.tool_calls:
            history.append(Message.tool(*(run_tool(c) for c in response.tool_calls)))
        elif (following := next(users, None)) is not None:
            history.append(Message.user(following))
    return history
