"""The pre-send rules read a history once: a check that looked each tool output's call up in
a list of every earlier call made a 60,000-item Responses input quadratic (3 s of the call's
5 s). Counted in comparisons, not timed."""

from __future__ import annotations

from typing import Any

from metis.wire.rules import (
    anthropic_problems,
    openai_chat_problems,
    openai_responses_problems,
)


class Counted(str):
    """A tool-call id that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


CALLS = 3_000


def ids(i: int) -> tuple[Counted, Counted]:
    """The same id as two objects: the call's and its output's (as JSON gives them)."""
    return Counted(f"call_{i}"), Counted(f"call_{i}")


def responses_input() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(CALLS):
        call, answer = ids(i)
        items.append({"type": "function_call", "call_id": call, "name": "f", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": answer, "output": "ok"})
    return items


def test_responses_outputs_are_matched_to_their_calls_in_linear_work() -> None:
    Counted.compared = 0
    assert openai_responses_problems({"input": responses_input()}) == []
    assert Counted.compared <= 4 * CALLS  # a list scan per output: ~CALLS**2 / 2


def test_an_output_without_its_call_is_still_found() -> None:
    items = responses_input()
    items.append({"type": "function_call_output", "call_id": "call_x", "output": "ok"})
    items.append({"type": "function_call", "call_id": "call_y", "name": "f", "arguments": "{}"})
    assert openai_responses_problems({"input": items}) == [
        "input: No tool call found for function call output with call_id call_x.",
        "input: No tool output found for function call call_y.",
    ]


def test_chat_and_messages_histories_are_read_in_linear_work() -> None:
    chat: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(CALLS):
        call, answer = ids(i)
        function = {"name": "f", "arguments": "{}"}
        chat.append({"role": "assistant", "tool_calls": [{"id": call, "function": function}]})
        chat.append({"role": "tool", "tool_call_id": answer, "content": "ok"})
        use = {"type": "tool_use", "id": call, "name": "f", "input": {}}
        result = {"type": "tool_result", "tool_use_id": answer, "content": "ok"}
        messages.append({"role": "assistant", "content": [use]})
        messages.append({"role": "user", "content": [result]})
    Counted.compared = 0
    assert openai_chat_problems({"messages": chat}) == []
    assert anthropic_problems({"messages": messages, "model": "m", "max_tokens": 1}) == []
    assert Counted.compared <= 4 * CALLS
